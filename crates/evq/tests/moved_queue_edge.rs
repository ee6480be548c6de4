//! A queue built on one thread and waited on from another (how servers start
//! workers) must keep reporting new arrivals in event mode on every backend.

mod util;

use evq::{EventQueue, Interest, Mode, Options};
use util::*;

#[test]
fn moved_queue_reports_each_arrival_in_event_mode() {
    for_each_backend(
        |c| c.event,
        |kind| {
            let q = EventQueue::with_backend(kind).unwrap();
            std::thread::spawn(move || {
                let mut q = q;
                let (ours, peer) = pair();
                // Two queues' worth of traffic: the listener-like first registration,
                // then a connection registered after the move.
                q.declare_interest(fd(&ours), Interest::READ, Options::new(1).mode(Mode::Event))
                    .unwrap();
                for round in 0..3 {
                    send(&peer, 3);
                    let got = wait_some(&mut q, 8);
                    assert_eq!(got[0].token(), 1, "round {round}");
                    assert_eq!(drain(&ours), 3, "round {round}");
                    assert!(peek(&mut q).is_empty(), "round {round}: re-reported");
                }
            })
            .join()
            .unwrap();
        },
    );
}

#[test]
fn two_moved_queues_each_see_split_arrivals() {
    for_each_backend(
        |c| c.event,
        |kind| {
            let queues: Vec<EventQueue> = (0..2)
                .map(|_| EventQueue::with_backend(kind).unwrap())
                .collect();
            let workers: Vec<_> = queues
                .into_iter()
                .map(|q| {
                    std::thread::spawn(move || {
                        let mut q = q;
                        // Wait once first, as a server worker does before its first connection.
                        assert!(
                            wait(&mut q, 8, Some(std::time::Duration::from_millis(20))).is_empty()
                        );
                        let (ours, peer) = pair();
                        q.declare_interest(
                            fd(&ours),
                            Interest::READ,
                            Options::new(1).mode(Mode::Event),
                        )
                        .unwrap();
                        send(&peer, 3);
                        assert_eq!(wait_some(&mut q, 8)[0].token(), 1);
                        assert_eq!(drain(&ours), 3);
                        std::thread::sleep(std::time::Duration::from_millis(20));
                        send(&peer, 5);
                        assert_eq!(
                            wait_some(&mut q, 8)[0].token(),
                            1,
                            "second part not reported"
                        );
                        assert_eq!(drain(&ours), 5);
                    })
                })
                .collect();
            for w in workers {
                w.join().unwrap();
            }
        },
    );
}

#[test]
fn registered_before_the_move_then_new_registration_after() {
    for_each_backend(
        |c| c.event,
        |kind| {
            let mut q = EventQueue::with_backend(kind).unwrap();
            let (first, first_peer) = pair();
            q.declare_interest(
                fd(&first),
                Interest::READ,
                Options::new(7).mode(Mode::Event),
            )
            .unwrap();
            std::thread::spawn(move || {
                let mut q = q;
                assert!(wait(&mut q, 8, Some(std::time::Duration::from_millis(20))).is_empty());
                let (ours, peer) = pair();
                send(&peer, 3);
                assert_eq!(drain(&ours), 3, "read right after accept");
                q.declare_interest(fd(&ours), Interest::READ, Options::new(1).mode(Mode::Event))
                    .unwrap();
                assert!(wait(&mut q, 8, Some(std::time::Duration::from_millis(20))).is_empty());
                send(&peer, 5);
                let got = wait_some(&mut q, 8);
                assert_eq!(got[0].token(), 1, "second part not reported: {got:?}");
                assert_eq!(drain(&ours), 5);
                send(&first_peer, 1);
                assert_eq!(
                    wait_some(&mut q, 8)[0].token(),
                    7,
                    "registration from before the move lost"
                );
            })
            .join()
            .unwrap();
        },
    );
}
