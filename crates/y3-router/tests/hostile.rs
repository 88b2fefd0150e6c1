//! The router under hostile clients: partial frames, pinned buffers, slow consumers, loops.
//! Each attack asserts a number.

mod common;

use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use y3_transport::frame::{ClientType, Frame};

use common::*;

/// A partial frame is cut at the stall timeout however it arrives: in a read of its own
/// after the handshake, and trickled a byte at a time so that the connection never looks
/// idle. Both are closed within one and a half stall timeouts (plus scheduling slack).
#[tokio::test]
async fn partial_frames_are_cut_at_the_stall_timeout_however_they_arrive() {
    const STALL: Duration = Duration::from_millis(300);
    let router = router(|c| c.limits.frame_stall_timeout_ms = STALL.as_millis() as u64).await;
    // A data frame header declaring 1 MiB - 1 of fields (within max_frame_len).
    let header = [0xbf, 0x80, 0xbf, 0xff, 0x7f];
    for trickle in [false, true] {
        let mut tcp = TcpStream::connect(router.tcp_addr().unwrap())
            .await
            .unwrap();
        tcp.write_all(&wire(Frame::from(hello(ClientType::Source, &[]))))
            .await
            .unwrap();
        // The handshake is answered first, so the partial frame lands in a read of its own.
        tokio::time::sleep(Duration::from_millis(50)).await;
        let started = Instant::now();
        tcp.write_all(&header).await.unwrap();
        let (mut rd, mut wr) = tcp.into_split();
        let writer = tokio::spawn(async move {
            while trickle && started.elapsed() < Duration::from_secs(5) {
                tokio::time::sleep(Duration::from_millis(20)).await;
                if wr.write_all(&[0x00]).await.is_err() {
                    break;
                }
            }
            wr
        });
        let mut reply = Vec::new();
        within("the stall close", rd.read_to_end(&mut reply))
            .await
            .unwrap();
        let took = started.elapsed();
        writer.abort();
        assert!(
            took >= STALL && took < STALL * 3 / 2 + Duration::from_millis(400),
            "trickle {trickle}: closed after {took:?}"
        );
        assert_eq!(
            goaway_code(&frames(&reply)),
            y3_transport::GoawayCode::ProtocolError
        );
    }
    assert_eq!(protocol_errors(&router, "frame_stalled"), 2);
    router.shutdown().await;
}
