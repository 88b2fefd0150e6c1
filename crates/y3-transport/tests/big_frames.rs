//! The frame codec and big frames: a frame over the limit is skipped as it streams past (in
//! many small pieces, never buffered), the frames around it decode normally, the reader is
//! mid-frame while the skipped body is still arriving, and a 16 MiB frame passes on the
//! default limit over a real framed pipe.

use std::time::Duration;

use bytes::BytesMut;
use futures_util::{SinkExt, StreamExt};
use tokio::io::AsyncWriteExt;
use tokio_util::codec::{Decoder, Encoder, FramedRead};
use y3_transport::frame::{kind, Data, Frame};
use y3_transport::{
    mid_frame, next_or_skipped, Connection, FrameCodec, FrameReader, Next, Skipped,
    DEFAULT_MAX_FRAME_LEN,
};

const LIMIT: usize = 1024;

fn wire(frames: &[Frame]) -> BytesMut {
    let mut codec = FrameCodec::new(i32::MAX as usize);
    let mut buf = BytesMut::new();
    for f in frames {
        codec.encode(f.clone(), &mut buf).unwrap();
    }
    buf
}

fn small(i: u8) -> Frame {
    Frame::Data(Data::new(0x10, vec![i; 10]))
}

/// Pieces of 1 to 13 bytes, a pseudo-random walk: the skip starts, continues and ends at
/// every kind of boundary (inside the header, inside the body, with the next frame's first
/// bytes in the same piece).
#[test]
fn a_frame_over_the_limit_is_skipped_in_small_pieces() {
    let big = Frame::Data(Data::new(0x10, vec![0xee; 40 * LIMIT]));
    let big_body = big.body_len() as u64;
    let frames = [small(1), big.clone(), small(2), big, small(3)];
    let bytes = wire(&frames);
    for seed in 0..20u64 {
        let mut codec = FrameCodec::new(LIMIT);
        let mut buf = BytesMut::new();
        let mut out = Vec::new();
        let mut skipped = Skipped::default();
        let mut most_buffered = 0;
        let (mut at, mut state) = (0, seed);
        while at < bytes.len() {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let n = (1 + (state >> 33) % 13) as usize;
            let end = (at + n).min(bytes.len());
            buf.extend_from_slice(&bytes[at..end]);
            at = end;
            while let Some(f) = codec.decode(&mut buf).unwrap() {
                out.push(f);
            }
            most_buffered = most_buffered.max(buf.len());
            if let Some(s) = codec.take_skipped() {
                skipped.frames += s.frames;
                skipped.data += s.data;
                skipped.bytes += s.bytes;
                skipped.last_kind = s.last_kind;
                skipped.last_len = s.last_len;
            }
        }
        assert_eq!(out, [small(1), small(2), small(3)], "seed {seed}");
        assert_eq!(
            skipped,
            Skipped {
                frames: 2,
                data: 2,
                bytes: 2 * big_body,
                last_kind: kind::DATA,
                last_len: big_body,
            }
        );
        // Never more than a small frame and a piece buffered: the skipped bodies were not.
        assert!(
            most_buffered < 64,
            "seed {seed}: {most_buffered} bytes buffered"
        );
        assert!(!codec.skipping());
        assert_eq!(codec.decode_eof(&mut buf).unwrap(), None);
    }
}

/// A reader whose codec is skipping is mid-frame with an empty read buffer (what the
/// router's stall timeout watches), [`next_or_skipped`] reports the skip as soon as it
/// starts, and the stream ending inside the skipped body is a truncated frame.
#[tokio::test]
async fn a_reader_skipping_is_mid_frame_and_says_so_at_once() {
    let (client, server) = tokio::io::duplex(4096);
    let mut reader: FrameReader = FramedRead::new(
        Box::pin(server) as y3_transport::BoxRead,
        FrameCodec::new(LIMIT),
    );
    let mut client = client;
    let big = wire(&[Frame::Data(Data::new(0x10, vec![7; 4 * LIMIT]))]);
    // The header and a little of the body.
    client.write_all(&big[..100]).await.unwrap();
    let next = tokio::time::timeout(Duration::from_secs(5), next_or_skipped(&mut reader))
        .await
        .unwrap();
    let Next::Skipped(s) = next else {
        panic!("expected the skip, got {next:?}")
    };
    assert_eq!((s.frames, s.data, s.last_kind), (1, 1, kind::DATA));
    assert!(reader.read_buffer().is_empty());
    assert!(mid_frame(&reader) && reader.decoder().skipping());
    // Nothing more yet: pending, still mid-frame.
    let pending = tokio::time::timeout(Duration::from_millis(50), reader.next()).await;
    assert!(pending.is_err());
    assert!(mid_frame(&reader));
    // The rest of the body and a small frame: the small frame comes out.
    client.write_all(&big[100..]).await.unwrap();
    client.write_all(&wire(&[small(9)])).await.unwrap();
    let got = tokio::time::timeout(Duration::from_secs(5), reader.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(got, small(9));
    assert!(!mid_frame(&reader));
    // Another over-long frame, cut off by the end of the stream: truncated.
    client.write_all(&big[..100]).await.unwrap();
    drop(client);
    let end = tokio::time::timeout(Duration::from_secs(5), reader.next())
        .await
        .unwrap();
    assert_eq!(end.unwrap().unwrap_err().kind(), "truncated");
}

/// 16 MiB payloads (and metadata) fit the default limit, both ways through a framed pipe
/// with the next small frame behind them; one byte over a limit is refused when encoding.
#[tokio::test]
async fn sixteen_mib_pass_the_default_limit() {
    const { assert!(DEFAULT_MAX_FRAME_LEN >= (16 << 20) + 4096) };
    let (mut a, mut b) = Connection::pair(FrameCodec::default(), 64 * 1024);
    let payload: Vec<u8> = (0..16u32 << 20).map(|i| (i % 253) as u8).collect();
    let big = Frame::Data(Data::new(0x10, payload).with_metadata(
        y3_transport::Metadata::from_pairs([("yomo-tid", "tid-0001")]),
    ));
    let sent = big.clone();
    let writer = tokio::spawn(async move {
        a.writer.send(sent).await.unwrap();
        a.writer.send(small(1)).await.unwrap();
        a
    });
    let got = b.reader.next().await.unwrap().unwrap();
    assert!(got == big, "the 16 MiB frame differs");
    assert_eq!(b.reader.next().await.unwrap().unwrap(), small(1));
    drop(writer.await.unwrap());
    // Encoding checks the receiver's limit.
    let mut codec = FrameCodec::new(LIMIT);
    let over = Frame::Data(Data::new(0x10, vec![0; LIMIT]));
    let err = codec.encode(over, &mut BytesMut::new()).unwrap_err();
    assert_eq!(err.kind(), "too_long");
}
