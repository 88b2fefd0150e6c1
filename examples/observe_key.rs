//! Take one key out of a Y3 packet, two ways: `y3::get` on a whole packet, and the
//! streaming `Observer` on a packet that arrives in pieces.
//!
//! ```sh
//! cargo run -p y3-examples --bin observe-key
//! ```

/// The demo's reading: noise under key 0x11, time under 0x12, origin under 0x13, all in
/// node 0x10.
#[derive(Debug, Default, PartialEq, y3::Message)]
struct NoiseData {
    #[y3(tag = 0x11)]
    noise: f32,
    #[y3(tag = 0x12)]
    time: i64,
    #[y3(tag = 0x13)]
    from: String,
}

fn main() -> anyhow::Result<()> {
    let reading = NoiseData {
        noise: 40.0,
        time: 1_600_000_000_000,
        from: "127.0.0.1".into(),
    };
    // YoMo's way: the struct is node 0x10 itself (`marshal` would wrap it in a root node).
    let packet = y3::typed::to_packet(0x10, &reading, y3::Dialect::Golang)?;
    println!("packet: {} bytes", packet.len());

    // One shot: walk the headers, skip everything off the path, borrow the value.
    let noise = y3::get(&packet, &[0x10, 0x11])?
        .ok_or_else(|| anyhow::anyhow!("no key 0x10/0x11"))?
        .f32()?;
    println!("get:      noise = {noise}");

    // Streaming: the same state machine, fed 3 bytes at a time.
    let mut observer = y3::Observer::new(y3::Config::DEFAULT, &[&[0x10, 0x13]])?;
    let mut from = String::new();
    for chunk in packet.chunks(3) {
        observer.feed_each(chunk, |value| {
            from = value.str().unwrap_or("<not utf-8>").to_owned();
        })?;
    }
    observer.finish()?;
    println!("observer: from = {from}");

    anyhow::ensure!(noise == 40.0 && from == "127.0.0.1", "unexpected values");
    Ok(())
}
