//! The candidate processes: spawned, tracked through their stdout,
//! signalled, restarted with a new incarnation.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use nix::sys::signal::Signal;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::mpsc;

/// What a candidate said on stdout, with its slot.
#[derive(Debug)]
pub(crate) struct Said {
    pub(crate) slot: usize,
    pub(crate) incarnation: u32,
    pub(crate) line: String,
}

/// One candidate slot: the current process and what it last said.
#[derive(Debug)]
struct Slot {
    child: Option<Child>,
    stdin: Option<ChildStdin>,
    incarnation: u32,
    /// The epoch of its live term, if it leads.
    leading: Option<u64>,
    stopped: bool,
}

/// N candidate slots running `torture-candidate` with common arguments
/// plus per-slot ones.
pub(crate) struct Candidates {
    bin: PathBuf,
    out: PathBuf,
    slots: Vec<Slot>,
    /// Per-slot extra arguments (e.g. the slot's proxy URL).
    extra: Vec<Vec<String>>,
    common: Vec<String>,
    tx: mpsc::UnboundedSender<Said>,
    rx: mpsc::UnboundedReceiver<Said>,
}

impl Candidates {
    pub(crate) fn new(
        bin: &Path,
        out: &Path,
        common: Vec<String>,
        extra: Vec<Vec<String>>,
    ) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        let slots = extra
            .iter()
            .map(|_| Slot {
                child: None,
                stdin: None,
                incarnation: 0,
                leading: None,
                stopped: false,
            })
            .collect();
        Candidates {
            bin: bin.to_owned(),
            out: out.to_owned(),
            slots,
            extra,
            common,
            tx,
            rx,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.slots.len()
    }

    /// The writer id of a slot's current incarnation.
    pub(crate) fn writer(&self, slot: usize) -> String {
        format!("c{slot}.{}", self.slots[slot].incarnation)
    }

    /// Starts a new incarnation in `slot`; returns its writer id and pid.
    pub(crate) fn spawn(&mut self, slot: usize) -> std::io::Result<(String, u32)> {
        self.slots[slot].incarnation += 1;
        let writer = self.writer(slot);
        let history = self.out.join(format!("candidate-{writer}.history"));
        let mut child = Command::new(&self.bin)
            .args(&self.common)
            .args(&self.extra[slot])
            .arg("--writer")
            .arg(&writer)
            .arg("--history")
            .arg(&history)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(self.out.join("candidates.stderr"))?,
            ))
            .kill_on_drop(true)
            .spawn()?;
        let pid = child.id().unwrap_or(0);
        let stdout = child.stdout.take().expect("piped");
        let tx = self.tx.clone();
        let incarnation = self.slots[slot].incarnation;
        tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                if tx
                    .send(Said {
                        slot,
                        incarnation,
                        line,
                    })
                    .is_err()
                {
                    return;
                }
            }
        });
        let s = &mut self.slots[slot];
        s.stdin = child.stdin.take();
        s.child = Some(child);
        s.leading = None;
        s.stopped = false;
        Ok((writer, pid))
    }

    /// Takes in what the candidates said so far (who leads).
    pub(crate) fn drain(&mut self) {
        while let Ok(said) = self.rx.try_recv() {
            self.apply(&said);
        }
    }

    fn apply(&mut self, said: &Said) {
        let slot = &mut self.slots[said.slot];
        if said.incarnation != slot.incarnation {
            return;
        }
        let mut words = said.line.split_whitespace();
        match (
            words.next(),
            words.next().and_then(|e| e.parse::<u64>().ok()),
        ) {
            (Some("elected"), Some(epoch)) => slot.leading = Some(epoch),
            (Some("lost" | "resigned"), _) => slot.leading = None,
            _ => {}
        }
    }

    /// Waits for the next line from any candidate (None after `timeout`).
    pub(crate) async fn next(&mut self, timeout: std::time::Duration) -> Option<()> {
        let said = tokio::time::timeout(timeout, self.rx.recv()).await.ok()??;
        self.apply(&said);
        Some(())
    }

    /// The slot that leads now (the highest epoch among running, unstopped
    /// slots that said `elected` and not yet `lost`/`resigned`).
    pub(crate) fn leader(&mut self) -> Option<usize> {
        self.drain();
        (0..self.slots.len())
            .filter(|&i| self.slots[i].child.is_some())
            .filter_map(|i| self.slots[i].leading.map(|e| (e, i)))
            .max()
            .map(|(_, i)| i)
    }

    /// The slots whose process exited by itself (an error it does not
    /// retry, such as a bucket it refuses); reaps them.
    pub(crate) fn exited(&mut self) -> Vec<usize> {
        let mut exited = Vec::new();
        for (i, s) in self.slots.iter_mut().enumerate() {
            if let Some(child) = s.child.as_mut()
                && matches!(child.try_wait(), Ok(Some(_)))
            {
                s.child = None;
                s.stdin = None;
                s.leading = None;
                s.stopped = false;
                exited.push(i);
            }
        }
        exited
    }

    /// Whether the slot's process says it leads.
    pub(crate) fn leads(&mut self, slot: usize) -> bool {
        self.drain();
        self.slots[slot].leading.is_some()
    }

    /// Whether some running, unstopped candidate leads.
    pub(crate) fn has_live_leader(&mut self) -> bool {
        self.drain();
        self.slots
            .iter()
            .any(|s| s.child.is_some() && !s.stopped && s.leading.is_some())
    }

    pub(crate) fn pid(&self, slot: usize) -> Option<i32> {
        self.slots[slot]
            .child
            .as_ref()
            .and_then(Child::id)
            .and_then(|p| i32::try_from(p).ok())
    }

    pub(crate) fn signal(&mut self, slot: usize, sig: Signal) {
        if let Some(pid) = self.pid(slot) {
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), sig);
        }
        match sig {
            Signal::SIGSTOP => self.slots[slot].stopped = true,
            Signal::SIGCONT => self.slots[slot].stopped = false,
            _ => {}
        }
    }

    /// SIGKILLs the slot's process and reaps it.
    pub(crate) async fn kill(&mut self, slot: usize) {
        self.signal(slot, Signal::SIGKILL);
        let s = &mut self.slots[slot];
        if let Some(mut child) = s.child.take() {
            let _ = child.wait().await;
        }
        s.stdin = None;
        s.leading = None;
        s.stopped = false;
    }

    /// Sends one command line to the slot's process.
    pub(crate) async fn send(&mut self, slot: usize, command: &str) {
        if let Some(stdin) = self.slots[slot].stdin.as_mut() {
            let _ = stdin.write_all(format!("{command}\n").as_bytes()).await;
            let _ = stdin.flush().await;
        }
    }

    /// Ends every process: `exit` on stdin, then SIGKILL after `patience`.
    pub(crate) async fn stop_all(&mut self, patience: std::time::Duration) {
        for slot in 0..self.slots.len() {
            self.signal(slot, Signal::SIGCONT);
            self.send(slot, "exit").await;
            self.slots[slot].stdin = None;
        }
        for slot in 0..self.slots.len() {
            if let Some(mut child) = self.slots[slot].child.take()
                && tokio::time::timeout(patience, child.wait()).await.is_err()
            {
                let _ = child.start_kill();
                let _ = child.wait().await;
            }
        }
    }
}
