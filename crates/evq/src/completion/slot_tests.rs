//! The ring's operation slots after a crowd (`table_shrink`): cut to the
//! highest in use, and an id of a cut slot never names the slot made again.

use super::*;

#[test]
fn a_crowd_of_operations_that_ends_takes_its_slots_with_it() {
    let Some(mut r) = evq_testkit::completions_or_skip(CompletionRing::new(), "CompletionRing")
    else {
        return;
    };
    let hour = Duration::from_secs(3600);
    // Two survivors first (the lowest slots), then a crowd of 3,000.
    let survivors = [r.timeout(hour, 1), r.timeout(hour, 2)];
    let crowd: Vec<OpId> = (0..3000).map(|i| r.timeout(hour, 100 + i)).collect();
    assert_eq!(r.slot_count, 3002);
    let chunks = r.slots.len();
    for (n, id) in crowd.iter().enumerate() {
        r.cancel(*id, 10_000 + n as u64);
    }
    let mut batch = Completions::with_capacity(256);
    let until = Instant::now() + Duration::from_secs(20);
    while r.in_flight() > 2 && Instant::now() < until {
        r.get_next_completion(&mut batch, Some(Duration::from_millis(100)))
            .unwrap();
    }
    assert_eq!(r.in_flight(), 2, "every cancel and cancelled timeout ended");
    assert_eq!(r.slot_count, 2, "cut down to the survivors");
    assert!(r.slots.len() == 1 && chunks > 1, "{chunks} chunks then");
    // The slots are made again with new generations: an id of the crowd is
    // no longer an operation (ENOENT), and the new timeout is not cancelled.
    let again = r.timeout(hour, 7);
    assert_eq!(again.0 as u32, crowd[0].0 as u32, "the same slot number");
    r.cancel(crowd[0], 8);
    let mut seen = Vec::new();
    while !seen.iter().any(|(t, _)| *t == 8) && Instant::now() < until {
        r.get_next_completion(&mut batch, Some(Duration::from_millis(100)))
            .unwrap();
        seen.extend(batch.iter().map(|c| (c.token(), c.result().is_ok())));
    }
    assert!(
        seen.contains(&(8, false)),
        "a stale id cancels nothing: {seen:?}"
    );
    assert!(
        !seen.iter().any(|(t, _)| *t == 7),
        "the new timeout lives on"
    );
    assert_eq!(r.in_flight(), 3);
    for id in survivors.into_iter().chain([again]) {
        r.cancel(id, 9);
    }
}
