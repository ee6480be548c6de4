//! The ring's operation slots after a crowd (`table_shrink`): cut to the
//! highest in use (not below the floor), and an id of a cut slot never names
//! the slot made again.

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
    assert_eq!(r.slots.len(), 3002usize.div_ceil(SLOT_CHUNK));
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
    let floor = table_shrink::SHRINK_MIN;
    assert_eq!(r.slot_count, floor, "cut down to the floor");
    assert_eq!(
        r.slots.len(),
        floor / SLOT_CHUNK + 1,
        "whole chunks given back, one kept above"
    );
    // The slots under the floor are taken first; the next is made again
    // past it, with a generation no id of the crowd carries: the crowd's id
    // for that number is no operation (ENOENT), and the new timeout lives.
    let below: Vec<OpId> = (0..floor - 2)
        .map(|i| r.timeout(hour, 20_000 + i as u64))
        .collect();
    let again = r.timeout(hour, 7);
    let old = crowd[floor - 2];
    assert_eq!(again.0 as u32, old.0 as u32, "the same slot number");
    r.cancel(old, 8);
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
    assert_eq!(r.in_flight(), floor + 1);
    for id in survivors.into_iter().chain(below).chain([again]) {
        r.cancel(id, 9);
    }
}
