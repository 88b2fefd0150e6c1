//! The Rust SDK's stream function [`Writer`] against `y3 serve`: a durable function writing
//! 300 outputs per input (every one stored and delivered once), and a write after the
//! function's connection is gone (an error, never a silent success). The same fan-out and
//! a targeted write against YoMo's own zipper are in `yomo.rs`.
//!
//! On `y3 serve`'s defaults the fan-out needs the router to cap loops per cycle rather than
//! deliveries per `yomo-tid` (`limits.max_deliveries_per_message`, 128 before).

mod common;

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::serve::Serve;
use common::WAIT;
use y3_transport::sdk::{ClientOptions, Sink, Source, StreamFunction, Writer};
use y3_transport::{Data, TransportError};

const INPUTS: u32 = 3;
const FAN_OUT: u32 = 300;

fn client(server: &Serve, name: &str) -> ClientOptions {
    ClientOptions::new(server.tcp).name(name)
}

/// A 4-byte big-endian number.
fn num(n: u32) -> Vec<u8> {
    n.to_be_bytes().to_vec()
}

/// Sends input `0` on 0x50 until the function's handler has seen one (it is subscribed),
/// then inputs `1..=INPUTS`.
async fn feed(source: &mut Source, seen: &Mutex<bool>) {
    let start = std::time::Instant::now();
    while !*seen.lock().unwrap() {
        assert!(start.elapsed() < WAIT, "the function got no probe");
        source.send(0x50, num(0)).await.unwrap();
        source.flush().await.unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for input in 1..=INPUTS {
        source.send(0x50, num(input)).await.unwrap();
    }
    source.flush().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_durable_function_writes_300_outputs_per_input_each_delivered_once() {
    let server = Serve::start::<&str>(&[]);
    let mut sink = Sink::connect(client(&server, "sink"), &[0x51])
        .await
        .unwrap();
    let seen = Arc::new(Mutex::new(false));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let handler_seen = seen.clone();
    let function = StreamFunction::new(client(&server, "splitter"), &[0x50]).durable();
    let function = tokio::spawn(function.run_with_writer_until(
        move |data: Data, out: Writer| {
            let seen = handler_seen.clone();
            async move {
                let input = u32::from_be_bytes(data.payload[..4].try_into().unwrap());
                if input == 0 {
                    *seen.lock().unwrap() = true;
                    return;
                }
                for i in 0..FAN_OUT {
                    out.write(0x51, num(input * 1000 + i)).await.unwrap();
                }
            }
        },
        async {
            let _ = stopped.await;
        },
    ));
    let mut source = Source::connect(client(&server, "source")).await.unwrap();
    feed(&mut source, &seen).await;

    let mut got = BTreeSet::new();
    for _ in 0..INPUTS * FAN_OUT {
        let data = tokio::time::timeout(WAIT, sink.recv())
            .await
            .expect("an output in time")
            .expect("open")
            .unwrap();
        let n = u32::from_be_bytes(data.payload[..4].try_into().unwrap());
        assert!(got.insert(n), "output {n} twice");
        assert_eq!(data.hops, 1, "{data:?}");
    }
    let want: BTreeSet<u32> = (1..=INPUTS)
        .flat_map(|input| (0..FAN_OUT).map(move |i| input * 1000 + i))
        .collect();
    assert_eq!(got, want);
    if let Ok(extra) = tokio::time::timeout(Duration::from_millis(300), sink.recv()).await {
        panic!("unexpected frame: {extra:?}");
    }
    stop.send(()).unwrap();
    let ended = tokio::time::timeout(WAIT, function).await;
    assert!(matches!(ended, Ok(Ok(Ok(())))), "{ended:?}");
    source.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_after_the_connection_is_gone_is_an_error() {
    for durable in [false, true] {
        let server = Serve::start::<&str>(&[]);
        let kept: Arc<Mutex<Option<Writer>>> = Arc::default();
        let seen = Arc::new(Mutex::new(false));
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let mut function = StreamFunction::new(client(&server, "keeper"), &[0x50]);
        if durable {
            function = function.durable();
        }
        let (handler_kept, handler_seen) = (kept.clone(), seen.clone());
        let function = tokio::spawn(function.run_with_writer_until(
            move |_: Data, out: Writer| {
                *handler_kept.lock().unwrap() = Some(out);
                *handler_seen.lock().unwrap() = true;
                async {}
            },
            async {
                let _ = stopped.await;
            },
        ));
        let mut source = Source::connect(client(&server, "source")).await.unwrap();
        feed(&mut source, &seen).await;
        let writer = kept.lock().unwrap().clone().expect("a writer");
        // While the function runs, the kept writer works.
        writer.write(0x51, num(1)).await.unwrap();
        stop.send(()).unwrap();
        let ended = tokio::time::timeout(WAIT, function).await;
        assert!(matches!(ended, Ok(Ok(Ok(())))), "{ended:?}");
        let late = writer.write(0x51, num(2)).await;
        assert!(
            matches!(late, Err(TransportError::Closed)),
            "durable {durable}: {late:?}"
        );
        let late = writer.write_with_target(0x51, num(3), "t").await;
        assert!(
            matches!(late, Err(TransportError::Closed)),
            "durable {durable}: {late:?}"
        );
        source.close().await.unwrap();
    }
}
