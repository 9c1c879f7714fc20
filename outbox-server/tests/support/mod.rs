//! Running the `outbox` binary in tests: a configuration file in a temporary directory, the
//! process with its log in a file, free ports, HTTP requests, SIGTERM.

#![allow(dead_code, clippy::unwrap_used)]

use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// A free loopback port (bound, then released).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// One `outbox run` process.
pub struct ServiceProcess {
    child: Child,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl ServiceProcess {
    /// Starts `outbox run` on `config` with `env` (nothing else of the test's environment
    /// but `PATH`).
    pub fn start(config: &str, env: &[(&str, &str)]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("outbox.toml");
        std::fs::write(&file, config).unwrap();
        let log = dir.path().join("outbox.log");
        let child = Command::new(env!("CARGO_BIN_EXE_outbox"))
            .arg("run")
            .arg(&file)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("RUST_LOG", "info")
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        Self {
            child,
            log,
            _dir: dir,
        }
    }

    /// What it logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Sends SIGTERM.
    pub fn terminate(&self) {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// Waits up to `timeout` for the process to exit.
    pub fn wait(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait().unwrap() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        None
    }
}

impl Drop for ServiceProcess {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// `GET http://address/path`: status and body.
pub async fn get(address: SocketAddr, path: &str) -> Result<(u16, String), reqwest::Error> {
    let response = reqwest::Client::new()
        .get(format!("http://{address}{path}"))
        .timeout(Duration::from_secs(10))
        .send()
        .await?;
    let status = response.status().as_u16();
    Ok((status, response.text().await?))
}

/// Polls `condition` every 100 ms until it holds or `timeout` passes.
pub async fn eventually<F, Fut>(timeout: Duration, mut condition: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if condition().await {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The value of the Prometheus sample `series` (`name{label="value",…}` exactly as
/// rendered) in `text`.
pub fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|line| {
        let (name, value) = line.rsplit_once(' ')?;
        (name == series).then(|| value.parse().ok()).flatten()
    })
}

/// An HTTP client that keeps the console's cookies (as `name=value`), follows no redirect
/// and shows what the server set.
pub struct Client {
    http: reqwest::Client,
    base: String,
    cookies: std::collections::BTreeMap<String, String>,
    /// The `Set-Cookie` headers of the last response.
    pub set_cookies: Vec<String>,
}

/// A response: status, `Location`, body, headers.
pub struct Answer {
    pub status: u16,
    pub location: Option<String>,
    pub body: String,
    pub headers: reqwest::header::HeaderMap,
}

impl Client {
    /// A client of `base` (`http://127.0.0.1:port` and an optional path prefix).
    pub fn new(base: impl Into<String>) -> Self {
        Self {
            http: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .timeout(Duration::from_secs(10))
                .build()
                .unwrap(),
            base: base.into(),
            cookies: std::collections::BTreeMap::new(),
            set_cookies: Vec::new(),
        }
    }

    fn cookie_header(&self) -> String {
        self.cookies
            .iter()
            .map(|(name, value)| format!("{name}={value}"))
            .collect::<Vec<_>>()
            .join("; ")
    }

    async fn send(&mut self, request: reqwest::RequestBuilder) -> Answer {
        let request = if self.cookies.is_empty() {
            request
        } else {
            request.header(reqwest::header::COOKIE, self.cookie_header())
        };
        let response = request.send().await.unwrap();
        self.set_cookies = response
            .headers()
            .get_all(reqwest::header::SET_COOKIE)
            .iter()
            .map(|value| value.to_str().unwrap().to_owned())
            .collect();
        for cookie in &self.set_cookies {
            let pair = cookie.split(';').next().unwrap();
            let (name, value) = pair.split_once('=').unwrap();
            if value.is_empty() || cookie.contains("Max-Age=0") {
                self.cookies.remove(name);
            } else {
                self.cookies.insert(name.to_owned(), value.to_owned());
            }
        }
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let location = headers
            .get(reqwest::header::LOCATION)
            .map(|value| value.to_str().unwrap().to_owned());
        let body = response.text().await.unwrap();
        Answer {
            status,
            location,
            body,
            headers,
        }
    }

    /// `GET path`.
    pub async fn get(&mut self, path: &str) -> Answer {
        let request = self.http.get(format!("{}{path}", self.base));
        self.send(request).await
    }

    /// `POST path` with a form.
    pub async fn post(&mut self, path: &str, form: &[(&str, &str)]) -> Answer {
        let request = self.http.post(format!("{}{path}", self.base)).form(form);
        self.send(request).await
    }

    /// Forgets a cookie (a browser of another site would not send it).
    pub fn forget(&mut self, name: &str) {
        self.cookies.remove(name);
    }

    /// Sets a cookie by hand.
    pub fn set(&mut self, name: &str, value: &str) {
        self.cookies.insert(name.to_owned(), value.to_owned());
    }

    /// Logs in with `token` through the login form.
    pub async fn log_in(&mut self, prefix: &str, token: &str) -> Answer {
        let form = self.get(&format!("{prefix}/login")).await;
        let csrf = hidden(&form.body, "csrf").unwrap();
        self.post(
            &format!("{prefix}/login"),
            &[("token", token), ("csrf", &csrf)],
        )
        .await
    }
}

/// The value of the hidden field `name` in `html`.
pub fn hidden(html: &str, name: &str) -> Option<String> {
    let marker = format!("name=\"{name}\" value=\"");
    let start = html.find(&marker)? + marker.len();
    let end = html[start..].find('"')? + start;
    Some(html[start..end].to_owned())
}
