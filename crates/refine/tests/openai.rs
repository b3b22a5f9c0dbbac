//! The OpenAI-compatible client against a real server: llama.cpp's, through llama-cpp-python
//! (`.venv-llama`, built by the test command), serving the SmolLM2 GGUF on loopback. Pages,
//! concurrent requests, the context check by the server's tokenizer, the server's own
//! overflow error, and a server stopped and started again under the client.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use trawl_refine::backend::openai::{OpenAi, OpenAiConfig};
use trawl_refine::backend::{Backend, BackendError, Request, Sampling};
use trawl_refine::lines::number_lines;
use trawl_refine::program::{Mode, execute};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn gguf() -> PathBuf {
    std::env::var("TRAWL_TEST_GGUF")
        .map(PathBuf::from)
        .unwrap_or_else(|_| {
            PathBuf::from(std::env::var("HOME").unwrap_or_default())
                .join(".cache/trawl/models/SmolLM2-135M-Instruct.Q4_1.gguf")
        })
}

struct Server(Child);
impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start(python: &Path, port: u16) -> Server {
    let child = Command::new(python)
        .args([
            "-m",
            "llama_cpp.server",
            "--host",
            "127.0.0.1",
            "--n_ctx",
            "2048",
            "--n_threads",
            "1",
        ])
        .arg("--port")
        .arg(port.to_string())
        .arg("--model")
        .arg(gguf())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start llama_cpp.server");
    let server = Server(child);
    let deadline = Instant::now() + Duration::from_secs(120);
    while Instant::now() < deadline {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return server;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    panic!("llama_cpp.server did not listen on {port}");
}

fn request(page: &str, max: usize) -> Request {
    Request {
        system: "You clean web pages: <keep>, <extract>, rm lines, <keep>.".into(),
        page: page.into(),
        seed: 5,
        max_new_tokens: max,
        sampling: Sampling::Greedy,
    }
}

#[test]
fn llama_cpp_server_answers_pages_and_survives_a_restart() {
    let python = std::env::var("TRAWL_LLAMA_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|_| root().join(".venv-llama/bin/python3"));
    if !python.exists() || !gguf().exists() {
        assert!(
            std::env::var("TRAWL_REQUIRE_PY").is_err(),
            "llama-cpp-python (.venv-llama) or the SmolLM2 GGUF is missing; the test command installs both"
        );
        eprintln!("skipped: no .venv-llama with llama-cpp-python, or no SmolLM2 GGUF");
        return;
    }
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("port")
        .port();
    let server = start(&python, port);
    let cfg = OpenAiConfig {
        base_url: format!("http://127.0.0.1:{port}/v1"),
        model: "smollm2".into(),
        api_key: None,
        timeout: Duration::from_secs(60),
        retries: 2,
        context_length: Some(2048),
    };
    let client = OpenAi::new(cfg.clone()).expect("client");
    let lines: Vec<String> = [
        "Home | Blog",
        "Rust 1.90 is out",
        "It adds lints.",
        "Copyright",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let page = number_lines(&lines);
    let reply = client.generate(&request(&page, 24)).expect("a reply");
    assert!(
        reply.prompt_tokens > 10 && reply.completion_tokens > 0,
        "{reply:?}"
    );
    assert!(reply.completion_tokens <= 24);
    let o = execute(&lines, &reply.generation, Mode::Trawl);
    assert!(o.text.is_some() || o.error.is_some());
    // Concurrent pages through one client.
    std::thread::scope(|s| {
        let hs: Vec<_> = (0..4)
            .map(|_| s.spawn(|| client.generate(&request(&page, 8))))
            .collect();
        for h in hs {
            assert!(h.join().expect("thread").is_ok());
        }
    });
    // Counted by the server's tokenizer and refused before sending.
    let long = number_lines(&vec![
        "many words on a long line of a page".to_string();
        400
    ]);
    assert!(matches!(
        client.generate(&request(&long, 64)),
        Err(BackendError::TooLong { limit: 2048, .. })
    ));
    // Without the check, the server's own overflow error reads the same.
    let unchecked = OpenAi::new(OpenAiConfig {
        context_length: None,
        ..cfg.clone()
    })
    .expect("client");
    match unchecked.generate(&request(&long, 64)) {
        Err(BackendError::TooLong { limit, .. }) => assert_eq!(limit, 2048),
        other => panic!("expected the server's context error, got {other:?}"),
    }
    // The server goes away: retried, then reported; back again: served.
    drop(server);
    let t = Instant::now();
    assert!(matches!(
        client.generate(&request(&page, 4)),
        Err(BackendError::Unreachable { attempts: 3, .. })
    ));
    assert!(t.elapsed() < Duration::from_secs(30));
    let _again = start(&python, port);
    assert!(client.generate(&request(&page, 4)).is_ok());
}
