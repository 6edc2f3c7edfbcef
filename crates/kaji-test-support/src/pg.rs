//! A throwaway PostgreSQL for tests, and a loopback TCP proxy that cuts
//! connections after N bytes.
//!
//! [`PgServer::shared`] runs `initdb` into a temporary directory and
//! `pg_ctl start` on a free loopback port (as root, through `runuser -u
//! postgres`, with the directory owned by postgres); the server is stopped
//! when the test process exits. The binaries are found in `$KAJI_PG_BIN`,
//! else `/usr/lib/postgresql/*/bin`. This module must never listen beyond
//! 127.0.0.1 or touch a server it did not start.

use std::net::{SocketAddr, TcpListener as StdListener};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The password of the fixture's `kaji` superuser.
pub const PG_PASSWORD: &str = "kaji-test-pw";

/// Why the fixture could not start a server.
#[derive(Debug, thiserror::Error)]
pub enum PgFixtureError {
    /// No `initdb` in `$KAJI_PG_BIN` or `/usr/lib/postgresql/*/bin`.
    #[error(
        "no PostgreSQL binaries (initdb) found; install the postgresql package or set KAJI_PG_BIN"
    )]
    NoBinaries,
    /// A step failed; `what` names it, `output` is its output.
    #[error("{what} failed: {output}")]
    Step {
        /// The step, e.g. `initdb`.
        what: String,
        /// What it printed.
        output: String,
    },
}

/// A running throwaway PostgreSQL server.
#[derive(Debug)]
pub struct PgServer {
    dir: PathBuf,
    port: u16,
    bin: PathBuf,
    as_postgres: bool,
}

static SHARED: OnceLock<Result<PgServer, String>> = OnceLock::new();
static STOP_ON_EXIT: Mutex<Vec<(PathBuf, PathBuf, bool)>> = Mutex::new(Vec::new());

extern "C" fn stop_all() {
    if let Ok(servers) = STOP_ON_EXIT.lock() {
        for (bin, dir, as_postgres) in servers.iter() {
            let _ = pg_ctl_stop(bin, dir, *as_postgres);
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

fn find_bin() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("KAJI_PG_BIN") {
        return Some(dir.into());
    }
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .flatten()
        .map(|e| e.path().join("bin"))
        .filter(|p| p.join("initdb").exists())
        .collect();
    found.sort();
    found.pop()
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

fn run(
    what: &str,
    bin: &Path,
    tool: &str,
    args: &[&str],
    as_postgres: bool,
) -> Result<(), PgFixtureError> {
    let program = bin.join(tool);
    let mut cmd = if as_postgres {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(&program);
        c
    } else {
        Command::new(&program)
    };
    use std::os::unix::process::CommandExt;
    let out = cmd
        .args(args)
        .stdin(Stdio::null())
        .process_group(0)
        .output()
        .map_err(|e| PgFixtureError::Step {
            what: what.to_string(),
            output: e.to_string(),
        })?;
    if out.status.success() {
        return Ok(());
    }
    Err(PgFixtureError::Step {
        what: what.to_string(),
        output: format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    })
}

fn pg_ctl_stop(bin: &Path, dir: &Path, as_postgres: bool) -> Result<(), PgFixtureError> {
    let data = dir.join("data");
    let data = data.to_string_lossy();
    run(
        "pg_ctl stop",
        bin,
        "pg_ctl",
        &["-D", &data, "-m", "immediate", "-w", "stop"],
        as_postgres,
    )
}

impl PgServer {
    /// The server shared by every test of this process (started on first
    /// use, stopped at exit).
    pub fn shared() -> Result<&'static PgServer, String> {
        SHARED
            .get_or_init(|| Self::start().map_err(|e| e.to_string()))
            .as_ref()
            .map_err(Clone::clone)
    }

    /// Starts a new server (stopped at process exit or by [`stop`](Self::stop)).
    pub fn start() -> Result<Self, PgFixtureError> {
        let bin = find_bin().ok_or(PgFixtureError::NoBinaries)?;
        let as_postgres = is_root();
        let dir = tempfile_dir()?;
        let step = |what: &str, e: std::io::Error| PgFixtureError::Step {
            what: what.to_string(),
            output: e.to_string(),
        };
        std::fs::write(dir.join("pw"), PG_PASSWORD).map_err(|e| step("write pwfile", e))?;
        if as_postgres {
            let owner = Command::new("chown")
                .args(["-R", "postgres:postgres"])
                .arg(&dir)
                .status()
                .map_err(|e| step("chown", e))?;
            if !owner.success() {
                return Err(PgFixtureError::Step {
                    what: "chown".into(),
                    output: "chown -R postgres failed".into(),
                });
            }
        }
        let data = dir.join("data").to_string_lossy().into_owned();
        let pw = dir.join("pw").to_string_lossy().into_owned();
        run(
            "initdb",
            &bin,
            "initdb",
            &[
                "-D",
                &data,
                "-U",
                "kaji",
                "--pwfile",
                &pw,
                "--auth",
                "scram-sha-256",
                "-E",
                "UTF8",
                "--no-sync",
            ],
            as_postgres,
        )?;
        let mut last = None;
        for _ in 0..3 {
            let port = free_port().map_err(|e| step("find a free port", e))?;
            let opts = format!(
                "-p {port} -k {} -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c max_connections=300",
                dir.display()
            );
            let log = dir.join("log").to_string_lossy().into_owned();
            match run(
                "pg_ctl start",
                &bin,
                "pg_ctl",
                &["-D", &data, "-o", &opts, "-l", &log, "-w", "start"],
                as_postgres,
            ) {
                Ok(()) => {
                    if let Ok(mut all) = STOP_ON_EXIT.lock() {
                        if all.is_empty() {
                            // SAFETY: registers a plain extern "C" function.
                            unsafe { libc::atexit(stop_all) };
                        }
                        all.push((bin.clone(), dir.clone(), as_postgres));
                    }
                    return Ok(Self {
                        dir,
                        port,
                        bin,
                        as_postgres,
                    });
                }
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or(PgFixtureError::NoBinaries))
    }

    /// The server's port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `postgres://kaji:PASSWORD@127.0.0.1:PORT/postgres?list=LIST`.
    pub fn url(&self, list: &str) -> String {
        url_at(self.port, list)
    }

    /// Stops the server now (`pg_ctl stop -m immediate`).
    pub fn stop(&self) -> Result<(), PgFixtureError> {
        pg_ctl_stop(&self.bin, &self.dir, self.as_postgres)
    }
}

/// The fixture's URL for a server (or proxy) on `port`.
pub fn url_at(port: u16, list: &str) -> String {
    format!("postgres://kaji:{PG_PASSWORD}@127.0.0.1:{port}/postgres?sslmode=disable&list={list}")
}

fn tempfile_dir() -> Result<PathBuf, PgFixtureError> {
    let base = std::env::temp_dir();
    let name = format!("kaji-pg-{}-{}", std::process::id(), rand_suffix());
    let dir = base.join(name);
    std::fs::create_dir_all(&dir).map_err(|e| PgFixtureError::Step {
        what: "create the data directory".into(),
        output: e.to_string(),
    })?;
    Ok(dir)
}

fn rand_suffix() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
}

fn free_port() -> std::io::Result<u16> {
    Ok(StdListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// A loopback TCP proxy that forwards to `target` and cuts each connection
/// once the client has sent more than `cut_after` bytes on it.
#[derive(Debug, Clone)]
pub struct CutProxy {
    addr: SocketAddr,
    cut_after: Arc<AtomicU64>,
}

impl CutProxy {
    /// Starts the proxy on a free loopback port (runs until the runtime ends).
    pub async fn start(target: SocketAddr) -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let cut_after = Arc::new(AtomicU64::new(u64::MAX));
        let limit = Arc::clone(&cut_after);
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let limit = limit.load(Ordering::SeqCst);
                tokio::spawn(async move {
                    if let Ok(server) = TcpStream::connect(target).await {
                        pipe(client, server, limit).await;
                    }
                });
            }
        });
        Ok(Self { addr, cut_after })
    }

    /// The proxy's port.
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// Connections opened from now on are cut after `bytes` client bytes.
    pub fn cut_after(&self, bytes: u64) {
        self.cut_after.store(bytes, Ordering::SeqCst);
    }
}

async fn pipe(client: TcpStream, server: TcpStream, limit: u64) {
    let (mut cr, mut cw) = client.into_split();
    let (mut sr, mut sw) = server.into_split();
    let up = async {
        let mut sent = 0u64;
        let mut buf = vec![0u8; 8192];
        loop {
            let n = match cr.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            let allowed = limit.saturating_sub(sent).min(n as u64) as usize;
            if sw.write_all(&buf[..allowed]).await.is_err() || allowed < n {
                return;
            }
            sent += n as u64;
        }
    };
    let down = async {
        let _ = tokio::io::copy(&mut sr, &mut cw).await;
    };
    tokio::select! {
        () = up => {}
        () = down => {}
    }
}
