//! The load: `wrk` for HTTP (with a Lua hook that prints its summary as JSON), and
//! a closed-loop client on evq for the echo ping-pong and for counting runs.
//!
//! The closed-loop client is one thread and one evq queue: every connection has
//! one message in flight; when its reply is complete the latency is recorded and
//! the next message goes out. It runs on its own CPU, so the server is the
//! bottleneck being measured.

use evq::{EventQueue, Events, Interest, Options};
use hdrhistogram::Histogram;
use serde::Serialize;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::process::Command;
use std::time::{Duration, Instant};

/// One measurement, whatever produced it.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Load {
    /// Replies completed in the measured interval.
    pub requests: u64,
    /// The measured interval, seconds.
    pub seconds: f64,
    pub req_per_s: f64,
    pub p50_us: u64,
    pub p99_us: u64,
    pub max_us: u64,
    /// Connect, read, write, status and timeout errors together.
    pub errors: u64,
}

const WRK_JSON: &str = r#"
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    '{"requests":%d,"duration_us":%d,"errors":%d,"p50_us":%d,"p99_us":%d,"max_us":%d}\n',
    summary.requests, summary.duration,
    e.connect + e.read + e.write + e.status + e.timeout,
    latency:percentile(50), latency:percentile(99), latency.max))
end
"#;

/// Runs wrk (one thread) against `url`, optionally pinned to `cpu`.
pub fn wrk(url: &str, connections: usize, seconds: u64, cpu: Option<usize>) -> io::Result<Load> {
    let script = std::env::temp_dir().join(format!("evq-async-bench-{}.lua", std::process::id()));
    std::fs::write(&script, WRK_JSON)?;
    let mut cmd = pinned(cpu, "wrk");
    cmd.args(["-t1", "--timeout", "5s", "-s"])
        .arg(&script)
        .arg(format!("-c{connections}"))
        .arg(format!("-d{seconds}s"))
        .arg(url);
    let out = cmd.output()?;
    let _ = std::fs::remove_file(&script);
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(io::Error::other(format!(
            "wrk failed ({}): {stdout}{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    let line = stdout
        .lines()
        .find(|l| l.starts_with('{'))
        .ok_or_else(|| io::Error::other(format!("no JSON line in wrk's output: {stdout}")))?;
    let v: serde_json::Value = serde_json::from_str(line).map_err(io::Error::other)?;
    let get = |k: &str| v[k].as_u64().unwrap_or(0);
    let seconds = get("duration_us") as f64 / 1e6;
    Ok(Load {
        requests: get("requests"),
        seconds,
        req_per_s: get("requests") as f64 / seconds,
        p50_us: get("p50_us"),
        p99_us: get("p99_us"),
        max_us: get("max_us"),
        errors: get("errors"),
    })
}

/// A command run under `taskset -c cpu` when a CPU is given.
pub fn pinned(cpu: Option<usize>, program: &str) -> Command {
    match cpu {
        Some(cpu) => {
            let mut c = Command::new("taskset");
            c.arg("-c").arg(cpu.to_string()).arg(program);
            c
        }
        None => Command::new(program),
    }
}

/// What the closed-loop client sends and how it knows a reply is complete.
#[derive(Clone, Copy, Debug)]
pub enum Protocol {
    /// `size` bytes out, the same `size` back.
    Echo { size: usize },
    /// `GET / HTTP/1.1` on a keep-alive connection; a reply is a head plus
    /// `Content-Length` bytes.
    Http,
}

/// When the closed-loop client stops.
#[derive(Clone, Copy, Debug)]
pub enum Until {
    Elapsed(Duration),
    Replies(u64),
}

struct Conn {
    stream: TcpStream,
    sent_at: Instant,
    got: Vec<u8>,
}

const REQUEST: &[u8] = b"GET / HTTP/1.1\r\nHost: bench\r\n\r\n";

/// Length of the first complete HTTP reply in `buf`, if there is one.
fn http_reply_len(buf: &[u8]) -> io::Result<Option<usize>> {
    let Some(head) = evq_wire::parse_response_head(buf, false, evq_wire::Strictness::Lenient)
        .map_err(io::Error::other)?
    else {
        return Ok(None);
    };
    if head.status != 200 {
        return Err(io::Error::other(format!("status {}", head.status)));
    }
    let len = head
        .body_len()
        .and_then(|n| usize::try_from(n).ok())
        .ok_or_else(|| io::Error::other("reply without Content-Length"))?;
    Ok((buf.len() >= head.len + len).then_some(head.len + len))
}

/// Runs `connections` closed-loop connections against `addr`.
pub fn closed_loop(
    addr: SocketAddr,
    connections: usize,
    protocol: Protocol,
    until: Until,
) -> io::Result<Load> {
    let message: Vec<u8> = match protocol {
        Protocol::Echo { size } => (0..size).map(|i| b'a' + (i % 26) as u8).collect(),
        Protocol::Http => REQUEST.to_vec(),
    };
    let mut queue = EventQueue::new()?;
    let mut conns = Vec::with_capacity(connections);
    for i in 0..connections {
        let stream = TcpStream::connect(addr)?;
        stream.set_nodelay(true)?;
        stream.set_nonblocking(true)?;
        queue.declare_interest(stream.as_raw_fd(), Interest::READ, Options::new(i as u64))?;
        conns.push(Conn {
            stream,
            sent_at: Instant::now(),
            got: Vec::with_capacity(4096),
        });
    }
    let mut hist = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).map_err(io::Error::other)?;
    let start = Instant::now();
    for c in &mut conns {
        c.sent_at = Instant::now();
        c.stream.write_all(&message)?;
    }
    let mut replies = 0u64;
    let mut events = Events::with_capacity(1024);
    let mut buf = vec![0u8; 64 * 1024];
    let mut errors = 0u64;
    loop {
        match until {
            Until::Elapsed(d) if start.elapsed() >= d => break,
            Until::Replies(n) if replies >= n => break,
            _ => {}
        }
        queue.get_next_event(&mut events, Some(Duration::from_millis(100)))?;
        let now = Instant::now();
        for ev in &events {
            let c = &mut conns[ev.token() as usize];
            // One read: a reply is far smaller than the buffer, and the queue is
            // level-triggered, so anything left is reported again. (Reading on to
            // EAGAIN made the client the slower side of the echo runs.)
            match c.stream.read(&mut buf) {
                Ok(0) => return Err(io::Error::other("server closed a connection")),
                Ok(n) => c.got.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => return Err(e),
            }
            let complete = match protocol {
                Protocol::Echo { size } => (c.got.len() >= size).then_some(size),
                Protocol::Http => http_reply_len(&c.got)?,
            };
            if let Some(len) = complete {
                if c.got.len() > len {
                    errors += 1; // a reply to a request not sent: the protocol broke
                }
                c.got.clear();
                let _ = hist.record(now.duration_since(c.sent_at).as_micros().max(1) as u64);
                replies += 1;
                c.sent_at = now;
                c.stream.write_all(&message)?;
            }
        }
    }
    let seconds = start.elapsed().as_secs_f64();
    Ok(Load {
        requests: replies,
        seconds,
        req_per_s: replies as f64 / seconds,
        p50_us: hist.value_at_quantile(0.50),
        p99_us: hist.value_at_quantile(0.99),
        max_us: hist.max(),
        errors,
    })
}
