//! The native HTTP/1.1 client against scripted servers: the framings and failures a
//! real server can produce, which the simulator (always chunked, always keep-alive)
//! does not.

use std::io::Write;
use std::net::TcpListener;

use benchplan::client::request::{Target, send};
use benchplan::metrics::sample::Sample;
use benchplan::plan::Backend;
use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderValue};

use crate::support::{read_request, scripted};

/// Two completions chunks, the usage chunk and `[DONE]`, as vLLM streams them.
const SSE: &str = "data: {\"choices\":[{\"index\":0,\"text\":\"a\"}]}\n\n\
                   data: {\"choices\":[{\"index\":0,\"text\":\"b\"}]}\n\n\
                   data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":2}}\n\n\
                   data: [DONE]\n\n";

fn chunked(body: &str) -> String {
    // Split into two HTTP chunks, so the decoder crosses a chunk boundary mid-event.
    let (a, b) = body.split_at(body.len() / 2);
    format!("{:x}\r\n{a}\r\n{:x}\r\n{b}\r\n0\r\n\r\n", a.len(), b.len())
}

fn target(base: &str) -> Target {
    let url = format!("{base}/v1/completions");
    let mut headers = HeaderMap::new();
    headers.insert(AUTHORIZATION, HeaderValue::from_static("Bearer secret"));
    Target::new(
        url,
        benchplan::base_url::BaseUrl::parse(base).unwrap(),
        Backend::Openai,
        "m".into(),
        headers,
        benchplan::client::http::build_client(false, None).unwrap(),
        benchplan::client::outcome::Limits {
            total: std::time::Duration::from_secs(10),
            ..Default::default()
        },
    )
}

fn assert_streamed(o: &Sample) {
    assert!(o.success, "{:?}", o.error);
    assert_eq!(
        (o.chunks, o.text.as_str(), o.usage_completion, o.done),
        (2, "ab", Some(2), true)
    );
}

#[tokio::test]
async fn a_pooled_connection_the_server_closed_is_retried_on_a_new_one() {
    // Each connection serves one keep-alive answer and is then closed by the server, as an
    // idle timeout does: the pooled connection is stale when the next request takes it.
    let (base, heads) = scripted(|_, s, heads| {
        if let Some((h, _)) = read_request(s) {
            heads.lock().unwrap().push(h);
            let body = chunked(SSE);
            let _ = s.write_all(
                format!("HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n{body}").as_bytes(),
            );
        }
    });
    let t = target(&base);
    assert!(
        t.native.is_some(),
        "plain http goes through the native client"
    );
    for i in 0..3 {
        let o = send(&t, b"{\"prompt\":\"x\"}".to_vec(), Some(&format!("id-{i}")))
            .await
            .sample;
        assert_streamed(&o);
        // Give the server's close time to arrive, so the next request finds it stale.
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let heads = heads.lock().unwrap();
    assert_eq!(heads.len(), 3, "one answered request per connection");
    let h = &heads[2];
    assert!(h.starts_with("POST /v1/completions HTTP/1.1\r\n"), "{h}");
    for line in [
        "authorization: Bearer secret",
        "x-request-id: id-2",
        "content-type: application/json",
        "content-length: 14",
    ] {
        assert!(h.contains(line), "{line} in {h}");
    }
}

#[tokio::test]
async fn length_and_close_framed_bodies_and_interim_answers() {
    let (base, _) = scripted(|conn, s, _| {
        // Keep-alive connection 0 answers twice: a 100 Continue then a content-length body,
        // then the same again; connection 1 (after "Connection: close") ends with the close.
        let close = conn > 0;
        while read_request(s).is_some() {
            let answer = if close {
                format!("HTTP/1.0 200 OK\r\ncontent-type: text/event-stream\r\n\r\n{SSE}")
            } else {
                format!(
                    "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{SSE}",
                    SSE.len()
                )
            };
            let _ = s.write_all(answer.as_bytes());
            if close {
                return; // dropping the stream closes it: the end of the body
            }
        }
    });
    let t = target(&base);
    assert_streamed(&send(&t, b"{}".to_vec(), None).await.sample);
    assert_streamed(&send(&t, b"{}".to_vec(), None).await.sample); // the same connection, reused
    // A fresh target means a fresh pool: its first connection is number 1, close-framed.
    let t = target(&base);
    assert_streamed(&send(&t, b"{}".to_vec(), None).await.sample);
}

#[tokio::test]
async fn a_head_longer_than_the_first_read_is_read_whole() {
    // The first read of an answer is small (a streamed body gives that buffer up): a
    // head several times its size, written with the body in one piece, still parses.
    let (base, _) = scripted(|_, s, _| {
        while read_request(s).is_some() {
            let pad = "p".repeat(6000);
            let answer = format!(
                "HTTP/1.1 200 OK\r\nx-pad: {pad}\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n{}",
                chunked(SSE)
            );
            let _ = s.write_all(answer.as_bytes());
        }
    });
    let t = target(&base);
    assert_streamed(&send(&t, b"{}".to_vec(), None).await.sample);
    assert_streamed(&send(&t, b"{}".to_vec(), None).await.sample);
}

#[tokio::test]
async fn broken_answers_become_counted_error_kinds() {
    let (base, _) = scripted(|conn, s, _| {
        if read_request(s).is_none() {
            return;
        }
        let answer: &[u8] = match conn {
            0 => b"", // closes without a word
            1 => b"SPEAK FRIEND\r\n\r\n",
            // Headers and part of the body, then the connection drops mid-stream.
            2 => b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n30\r\ndata: {\"choices\":[{\"index\":0,\"text\":\"a\"}]}\n\n",
            _ => b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 37\r\n\r\n{\"error\":{\"message\":\"overloaded now\"}}",
        };
        let _ = s.write_all(answer);
    });
    let mut kinds = vec![];
    for _ in 0..4 {
        // A new target each time, so each request opens the next scripted connection.
        let o = send(&target(&base), b"{}".to_vec(), None).await.sample;
        assert!(!o.success);
        let e = o.error.unwrap();
        kinds.push(e.kind.clone());
        if e.kind == "http_503" {
            assert!(e.message.contains("overloaded now"), "{}", e.message);
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(
        kinds,
        ["connection", "request", "stream_broken", "http_503"]
    );
}

#[tokio::test]
async fn nobody_listening_is_a_connection_error() {
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let o = send(
        &target(&format!("http://127.0.0.1:{port}")),
        b"{}".to_vec(),
        None,
    )
    .await;
    assert_eq!(o.sample.error.map(|e| e.kind), Some("connection".into()));
}

#[tokio::test]
async fn a_request_dropped_mid_stream_closes_its_connection() {
    // An aborted run drops its requests' futures. The stream is being read elsewhere
    // (the reader thread on Linux), so the drop must reach it: the server has to see
    // the connection close, or it would go on generating for nobody.
    let (closed_tx, closed_rx) = std::sync::mpsc::channel();
    let (base, _) = scripted(move |_, s, _| {
        if read_request(s).is_none() {
            return;
        }
        let first = "data: {\"choices\":[{\"index\":0,\"text\":\"a\"}]}\n\n";
        let _ = s.write_all(
            format!(
                "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n{:x}\r\n{first}\r\n",
                first.len()
            )
            .as_bytes(),
        );
        // Then nothing more: wait for the client to go away (bounded).
        s.set_read_timeout(Some(std::time::Duration::from_secs(5)))
            .unwrap();
        let mut b = [0u8; 64];
        let gone = match std::io::Read::read(s, &mut b) {
            Ok(0) => true,
            Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
            Ok(_) => false,
        };
        let _ = closed_tx.send(gone);
    });
    let t = target(&base);
    let cut = tokio::time::timeout(
        std::time::Duration::from_millis(300),
        send(&t, b"{}".to_vec(), None),
    )
    .await;
    assert!(cut.is_err(), "the stream never ends, so the wait is cut");
    let gone = tokio::task::spawn_blocking(move || {
        closed_rx.recv_timeout(std::time::Duration::from_secs(10))
    })
    .await
    .unwrap();
    assert_eq!(gone, Ok(true), "the server saw the connection close");
}

#[tokio::test]
async fn a_streamed_answer_read_to_its_end_leaves_its_connection_for_the_next_request() {
    // Chunked answers on one keep-alive connection, the way vLLM streams: after each
    // body's last chunk the connection goes back to the pool (from wherever the body
    // was read) and carries the next request.
    let (base, heads) = scripted(|conn, s, heads| {
        while read_request(s).is_some() {
            heads.lock().unwrap().push(format!("connection {conn}"));
            let body = chunked(SSE);
            let _ = s.write_all(
                format!("HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n{body}").as_bytes(),
            );
        }
    });
    let t = target(&base);
    for _ in 0..3 {
        assert_streamed(&send(&t, b"{}".to_vec(), None).await.sample);
        assert_eq!(t.native.as_ref().unwrap().pool.idle_count(), 1);
    }
    assert_eq!(
        *heads.lock().unwrap(),
        ["connection 0", "connection 0", "connection 0"]
    );
}
