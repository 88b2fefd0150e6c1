//! The sizes of the types a routed frame travels in, from the read buffer to its outbox
//! slot (issue 28): a move of one of them past 128 bytes is a `memcpy` call, so a type that
//! grows costs instructions on every routed frame. The test prints them
//! (`cargo test -p y3-router --lib sizes -- --nocapture`) and fails when one grows past
//! its size today.

use std::mem::size_of;

use y3_transport::frame::{Frame, FrameError};
use y3_transport::{Data, Next};

use crate::outbox::Queued;
use crate::session::{Event, Routed, Verdict};

#[test]
fn per_frame_types_stay_as_small_as_they_are() {
    let sizes = [
        ("Data", size_of::<Data>(), 168),
        ("Frame", size_of::<Frame>(), 168),
        (
            "Result<Frame, FrameError>",
            size_of::<Result<Frame, FrameError>>(),
            168,
        ),
        ("Next", size_of::<Next>(), 168),
        ("Routed", size_of::<Routed>(), 192),
        ("Event", size_of::<Event>(), 200),
        ("Verdict", size_of::<Verdict>(), 32),
        ("Queued", size_of::<Queued>(), 40),
    ];
    for (name, size, _) in sizes {
        println!("{name}: {size} B");
    }
    for (name, size, most) in sizes {
        assert!(size <= most, "{name} is {size} B, more than {most} B");
    }
}

/// `Spread::watch` holds its step once, polled where it lies: an `async fn` watch held it
/// twice (its argument, and the pinned copy it moved it into on the first poll), so a
/// routed frame's 3 KiB step was copied once per frame.
#[test]
fn a_watched_step_is_held_once() {
    async fn step() -> u8 {
        let held = [1u8; 1024];
        std::future::ready(()).await;
        held[std::hint::black_box(3)]
    }
    let mut spread = crate::spread::Spread::default();
    let step_size = std::mem::size_of_val(&step());
    let watch = spread.watch(step());
    let watch_size = std::mem::size_of_val(&watch);
    println!("step: {step_size} B, watched: {watch_size} B");
    assert!(
        watch_size <= step_size + 2 * size_of::<usize>(),
        "a watched {step_size} B step takes {watch_size} B"
    );
}
