//! The child processes of a soak: this same binary in the producer, relay and consumer
//! roles, each with the plan in its environment and its log in the run folder. A child that
//! exits without being killed is counted and started again (the producer's success is the
//! one exit that is not).

use std::path::PathBuf;
use std::process::Stdio;

use tokio::process::{Child, Command};

use crate::error::SoakError;
use crate::plan::PLAN_VARIABLE;

/// What a child process is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The producer.
    Producer,
    /// Relay `n`.
    Relay(u32),
    /// The consumer of share `n`.
    Consumer(u32),
}

impl Kind {
    fn args(self) -> Vec<String> {
        match self {
            Self::Producer => vec!["producer".to_owned()],
            Self::Relay(n) => vec!["relay".to_owned(), "--instance".to_owned(), n.to_string()],
            Self::Consumer(n) => vec!["consumer".to_owned(), "--share".to_owned(), n.to_string()],
        }
    }

    fn log_name(self) -> String {
        match self {
            Self::Producer => "producer.log".to_owned(),
            Self::Relay(n) => format!("relay-{n}.log"),
            Self::Consumer(n) => format!("consumer-{n}.log"),
        }
    }
}

/// One child: its kind and its process while it runs.
#[derive(Debug)]
struct Slot {
    kind: Kind,
    child: Option<Child>,
    /// The producer exited successfully: it is not started again.
    done: bool,
}

/// The soak's child processes.
#[derive(Debug)]
pub struct Processes {
    exe: PathBuf,
    plan: String,
    dir: PathBuf,
    log_filter: String,
    slots: Vec<Slot>,
    /// Exits nobody asked for (a crash or an error of the role), each restarted.
    pub unexpected_exits: u64,
}

impl Processes {
    /// No children yet; they will run `exe` with `plan` (JSON), logging to `dir`.
    pub fn new(exe: PathBuf, plan: String, dir: PathBuf, log_filter: String) -> Self {
        Self {
            exe,
            plan,
            dir,
            log_filter,
            slots: Vec::new(),
            unexpected_exits: 0,
        }
    }

    /// Starts a child of `kind`.
    ///
    /// # Errors
    /// When the process cannot be started.
    pub fn add(&mut self, kind: Kind) -> Result<(), SoakError> {
        let child = self.spawn(kind)?;
        self.slots.push(Slot {
            kind,
            child: Some(child),
            done: false,
        });
        Ok(())
    }

    /// The kinds of the children that can be killed now (running, not done), in order.
    pub fn running(&self, pick: impl Fn(Kind) -> bool) -> Vec<Kind> {
        self.slots
            .iter()
            .filter(|slot| slot.child.is_some() && !slot.done && pick(slot.kind))
            .map(|slot| slot.kind)
            .collect()
    }

    /// Kills the child of `kind` (`SIGKILL`) and waits for it; it is not restarted.
    ///
    /// # Errors
    /// When the process cannot be signalled.
    pub async fn kill(&mut self, kind: Kind) -> Result<(), SoakError> {
        for slot in self.slots.iter_mut().filter(|slot| slot.kind == kind) {
            if let Some(mut child) = slot.child.take() {
                child.start_kill()?;
                child.wait().await?;
            }
        }
        Ok(())
    }

    /// The process id of the running child of `kind`.
    pub fn pid(&self, kind: Kind) -> Option<u32> {
        self.slots
            .iter()
            .find(|slot| slot.kind == kind)
            .and_then(|slot| slot.child.as_ref())
            .and_then(Child::id)
    }

    /// Starts the child of `kind` again if it is not running (and not done).
    ///
    /// # Errors
    /// When the process cannot be started.
    pub fn restart(&mut self, kind: Kind) -> Result<(), SoakError> {
        let Some(index) = self.slots.iter().position(|slot| slot.kind == kind) else {
            return Ok(());
        };
        if self.slots[index].child.is_none() && !self.slots[index].done {
            let child = self.spawn(kind)?;
            self.slots[index].child = Some(child);
        }
        Ok(())
    }

    /// Notices children that exited by themselves: the producer's success marks it done,
    /// any other exit is counted and the child started again.
    ///
    /// # Errors
    /// When a process cannot be started again.
    pub fn reap(&mut self) -> Result<(), SoakError> {
        let mut exited = Vec::new();
        for slot in &mut self.slots {
            let Some(child) = slot.child.as_mut() else {
                continue;
            };
            if let Ok(Some(status)) = child.try_wait() {
                slot.child = None;
                if slot.kind == Kind::Producer && status.success() {
                    slot.done = true;
                } else {
                    tracing::warn!(kind = ?slot.kind, %status, "a child exited by itself");
                    exited.push(slot.kind);
                }
            }
        }
        for kind in exited {
            self.unexpected_exits += 1;
            self.restart(kind)?;
        }
        Ok(())
    }

    /// Kills every child.
    pub async fn kill_all(&mut self) {
        for slot in &mut self.slots {
            if let Some(mut child) = slot.child.take() {
                let _ = child.start_kill();
                let _ = child.wait().await;
            }
        }
    }

    fn spawn(&self, kind: Kind) -> Result<Child, SoakError> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join(kind.log_name()))?;
        Ok(Command::new(&self.exe)
            .args(kind.args())
            .env(PLAN_VARIABLE, &self.plan)
            .env("RUST_LOG", &self.log_filter)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .kill_on_drop(true)
            .spawn()?)
    }
}
