//! The candidate processes: spawned, tracked through their stdout,
//! signalled, restarted with a new incarnation. A candidate is a
//! `torture-candidate` process, or in `--elect` mode an `elect run`
//! process (its own process group) whose command is `torture-command`.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use nix::sys::signal::Signal;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::mpsc;

use crate::rng::Rng;

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

/// How `elect run` candidates are started (`--elect` mode).
pub(crate) struct ElectLaunch {
    /// The `elect` binary.
    pub(crate) elect_bin: PathBuf,
    /// The `torture-command` binary.
    pub(crate) command_bin: PathBuf,
    /// The backend URL; `None`: no `--backend`, the default directory
    /// (the `reboot` fault's runs).
    pub(crate) backend: Option<String>,
    /// `elect run`'s timing flags (TTL, renew, kill grace), also the
    /// inner `elect run`'s of a nested command.
    pub(crate) timing: Vec<String>,
    /// The environment of every candidate (`XDG_STATE_HOME`,
    /// `XDG_RUNTIME_DIR`, `TMPDIR` in the run directory).
    pub(crate) env: Vec<(String, PathBuf)>,
    /// The resource, as `torture-command --resource` takes it.
    pub(crate) resource: String,
    /// How each slot's next incarnations are started, where not as
    /// usual (the `hardlink`, `spellings` and `nested` faults).
    pub(crate) launch_of: Vec<SlotLaunch>,
    /// Draws each incarnation's command: escaping, ignoring SIGTERM.
    pub(crate) rng: Rng,
}

/// How a slot reaches the backend, when not as the run's `backend` says:
/// another URL, and a command `elect` runs under (a mount namespace with
/// a bind mount).
#[derive(Clone, Debug, Default)]
pub(crate) struct Reach {
    /// The backend URL.
    pub(crate) url: String,
    /// The program and arguments `elect run ...` is appended to (empty:
    /// `elect` itself).
    pub(crate) wrapper: Vec<String>,
}

impl Reach {
    /// `url` in a mount namespace of the candidate's own where `dir` is
    /// bind mounted on `at` (which must exist): one directory under two
    /// paths, as a container's volume is.
    pub(crate) fn bind_mounted(url: String, dir: &Path, at: &Path) -> Reach {
        let script = format!(
            "mount --bind '{}' '{}' && exec \"$0\" \"$@\"",
            dir.display(),
            at.display()
        );
        Reach {
            url,
            wrapper: ["unshare", "-m", "--propagation", "private", "sh", "-c"]
                .map(str::to_owned)
                .into_iter()
                .chain([script])
                .collect(),
        }
    }
}

/// How one slot's next incarnations are started (`--elect` mode).
#[derive(Clone, Debug, Default)]
pub(crate) struct SlotLaunch {
    /// Another way to the backend (`None`: the run's).
    pub(crate) reach: Option<Reach>,
    /// The command runs under an inner `elect run` of the slot's own
    /// election ([`inner_election`]), and writes with the outer term's
    /// token.
    pub(crate) nested: bool,
    /// The command always escapes (not a third of the time).
    pub(crate) escape: bool,
}

/// The election of slot `slot`'s inner `elect run` (the `nested` fault):
/// the slot's own, as a per-host job's would be, so that nothing but the
/// end of the outer term ends its job.
pub(crate) fn inner_election(slot: usize) -> String {
    format!("{}-inner-c{slot}", crate::orchestrate::ELECTION)
}

/// The variable a nested command finds the outer term's token in.
const OUTER_TOKEN: &str = "TORTURE_OUTER_TOKEN";

/// The file the orchestrator creates when a run ends: commands and their
/// escaped workers stop writing when it exists.
pub(crate) const END_FILE: &str = "end";

/// N candidate slots running `torture-candidate` with common arguments
/// plus per-slot ones, or `elect run` (`elect` is `Some`).
pub(crate) struct Candidates {
    bin: PathBuf,
    out: PathBuf,
    slots: Vec<Slot>,
    /// Per-slot extra arguments (e.g. the slot's proxy URL).
    extra: Vec<Vec<String>>,
    common: Vec<String>,
    elect: Option<ElectLaunch>,
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
            elect: None,
            tx,
            rx,
        }
    }

    /// `n` slots running `elect run` as `launch` says.
    pub(crate) fn elect(out: &Path, n: usize, launch: ElectLaunch) -> Self {
        let mut c = Candidates::new(&launch.elect_bin, out, Vec::new(), vec![Vec::new(); n]);
        c.elect = Some(launch);
        c
    }

    /// Sets how `slot`'s next incarnations are started (`--elect` mode;
    /// the default: as the run's others).
    pub(crate) fn set_launch(&mut self, slot: usize, launch: SlotLaunch) {
        if let Some(e) = self.elect.as_mut() {
            e.launch_of[slot] = launch;
        }
    }

    /// The process to start in `slot` as `writer`.
    fn command(&mut self, slot: usize, writer: &str) -> std::io::Result<Command> {
        let Some(e) = self.elect.as_mut() else {
            let history = self.out.join(format!("candidate-{writer}.history"));
            let mut cmd = Command::new(&self.bin);
            cmd.args(&self.common)
                .args(&self.extra[slot])
                .arg("--writer")
                .arg(writer)
                .arg("--history")
                .arg(&history)
                .stdin(Stdio::piped());
            return Ok(cmd);
        };
        let launch = &e.launch_of[slot];
        let backend = launch.reach.as_ref().map(|r| &r.url).or(e.backend.as_ref());
        let wrapper = launch.reach.as_ref().map_or(&[][..], |r| &r.wrapper[..]);
        let mut cmd = match wrapper.split_first() {
            None => Command::new(&e.elect_bin),
            Some((program, rest)) => {
                let mut cmd = Command::new(program);
                cmd.args(rest).arg(&e.elect_bin);
                cmd
            }
        };
        cmd.arg("run");
        if let Some(url) = backend {
            cmd.arg("--backend").arg(url);
        }
        cmd.arg("--identity")
            .arg(writer)
            .args(&e.timing)
            .arg("--name")
            .arg(crate::orchestrate::ELECTION)
            .arg("--");
        if launch.nested {
            // The outer term's token passed on, then an inner `elect run`
            // of the slot's own election (it sets `ELECTION_TOKEN` to its
            // own term's).
            cmd.arg("sh")
                .arg("-c")
                .arg(format!(
                    "{OUTER_TOKEN}=\"$ELECTION_TOKEN\" exec \"$0\" \"$@\""
                ))
                .arg(&e.elect_bin)
                .arg("run");
            if let Some(url) = backend {
                cmd.arg("--backend").arg(url);
            }
            cmd.arg("--identity")
                .arg(format!("{writer}i"))
                .args(&e.timing)
                .arg("--name")
                .arg(inner_election(slot))
                .arg("--");
        }
        cmd.arg(&e.command_bin)
            .arg("--writer")
            .arg(writer)
            .arg("--history-dir")
            .arg(&self.out)
            .arg("--resource")
            .arg(&e.resource)
            .arg("--end-file")
            .arg(self.out.join(END_FILE));
        if launch.nested {
            cmd.arg("--token-env").arg(OUTER_TOKEN);
        }
        cmd.envs(e.env.iter().map(|(k, v)| (k, v)));
        // A third of the commands leave the way daemons do; a third
        // ignore SIGTERM (seeded). Both are drawn every time, so that a
        // forced escape leaves the seeded sequence as it was.
        let escape = e.rng.below(3) == 0;
        if escape || launch.escape {
            cmd.arg("--escape");
        }
        if e.rng.below(3) == 0 {
            cmd.arg("--ignore-term");
        }
        // Its own process group: `groupstop` stops elect, its supervisor
        // and the command (not what left the group).
        cmd.stdin(Stdio::null()).process_group(0);
        Ok(cmd)
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
        let mut child = self
            .command(slot, &writer)?
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

    /// The epoch of the term the slot's process says it leads.
    pub(crate) fn epoch(&mut self, slot: usize) -> Option<u64> {
        self.drain();
        self.slots[slot].leading
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

    /// SIGKILLs the slot's whole process group (`--elect` mode: `elect`,
    /// its supervisor, the command, a nested `elect run` and its command;
    /// not what escaped the group) and reaps its process.
    pub(crate) async fn kill_group(&mut self, slot: usize) {
        self.signal_group(slot, Signal::SIGKILL);
        self.kill(slot).await;
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

    /// The pid of `slot`'s supervisor (`--elect` mode): the child of its
    /// `elect` process (elect forks it first, before the campaign).
    pub(crate) fn supervisor_pid(&self, slot: usize) -> Option<i32> {
        let elect = self.pid(slot)?;
        children_of(elect).into_iter().next()
    }

    /// Sends `sig` to `slot`'s process group (`--elect` mode: `elect`, its
    /// supervisor, the command and whatever stayed in the group).
    pub(crate) fn signal_group(&mut self, slot: usize, sig: Signal) {
        if let Some(pid) = self.pid(slot) {
            let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pid), sig);
        }
        match sig {
            Signal::SIGSTOP => self.slots[slot].stopped = true,
            Signal::SIGCONT => self.slots[slot].stopped = false,
            _ => {}
        }
    }

    /// Sends one command line to the slot's process. In `--elect` mode
    /// only `resign` means something: SIGTERM to `elect`, which forwards
    /// it to the command.
    pub(crate) async fn send(&mut self, slot: usize, command: &str) {
        if self.elect.is_some() {
            if command == "resign" {
                self.signal(slot, Signal::SIGTERM);
            }
            return;
        }
        if let Some(stdin) = self.slots[slot].stdin.as_mut() {
            let _ = stdin.write_all(format!("{command}\n").as_bytes()).await;
            let _ = stdin.flush().await;
        }
    }

    /// Ends every process: `exit` on stdin, then SIGKILL after `patience`.
    /// In `--elect` mode: the end file first (every command and escaped
    /// worker stops writing and exits), SIGCONT to each group, SIGTERM to
    /// each `elect`; after `patience` SIGKILL; then every command process
    /// of the run still alive is SIGKILLed.
    pub(crate) async fn stop_all(&mut self, patience: std::time::Duration) {
        if self.elect.is_some() {
            let _ = std::fs::write(self.out.join(END_FILE), b"");
            for slot in 0..self.slots.len() {
                self.signal_group(slot, Signal::SIGCONT);
                self.signal(slot, Signal::SIGTERM);
            }
        }
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
        if self.elect.is_some() {
            let mark = format!("{}", self.out.join(END_FILE).display());
            let deadline = std::time::Instant::now() + patience;
            loop {
                let left = processes_naming(&mark);
                if left.is_empty() {
                    break;
                }
                if std::time::Instant::now() >= deadline {
                    for pid in left {
                        let _ = nix::sys::signal::kill(
                            nix::unistd::Pid::from_raw(pid),
                            Signal::SIGKILL,
                        );
                    }
                    break;
                }
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
        }
    }
}

/// The pids whose parent is `parent`, from `/proc`.
pub(crate) fn children_of(parent: i32) -> Vec<i32> {
    let mut found = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return found;
    };
    for entry in dir.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // `pid (comm) state ppid ...`: split after the last ')'.
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse::<i32>().ok());
        if ppid == Some(parent) {
            found.push(pid);
        }
    }
    found.sort_unstable();
    found
}

/// The live processes (not zombies) whose command line has `word` as one
/// argument: a run's commands name its end file.
pub(crate) fn processes_naming(word: &str) -> Vec<i32> {
    let mut found = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return found;
    };
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        // A zombie's command line reads empty.
        if cmdline.split(|b| *b == 0).any(|arg| arg == word.as_bytes()) {
            found.push(pid);
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(cmd: &Command) -> Vec<String> {
        let std = cmd.as_std();
        std::iter::once(std.get_program())
            .chain(std.get_args())
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    fn launch(backend: Option<&str>) -> ElectLaunch {
        ElectLaunch {
            elect_bin: "/bin/elect".into(),
            command_bin: "/bin/torture-command".into(),
            backend: backend.map(str::to_owned),
            timing: vec!["--kill-grace".into(), "500ms".into()],
            env: vec![("XDG_STATE_HOME".into(), "/run/state".into())],
            resource: "file:/run/resource".into(),
            launch_of: vec![SlotLaunch::default(); 2],
            rng: Rng::new(1),
        }
    }

    /// The `spellings` and `nested` faults' candidates: `elect run` under
    /// the bind mount's wrapper with the second URL; an inner `elect run`
    /// of the slot's own election whose command reads the outer token.
    /// Without a backend (`reboot`'s runs) no `--backend` is given.
    #[test]
    fn a_slot_is_started_through_a_second_path_or_nested() {
        let out = Path::new("/run");
        let mut c = Candidates::elect(out, 2, launch(None));
        let plain = args(&c.command(0, "c0.1").expect("a command"));
        assert_eq!(plain[..2], ["/bin/elect", "run"]);
        assert!(!plain.contains(&"--backend".to_owned()), "{plain:?}");
        let reach = Reach::bind_mounted(
            "file:///run/second".into(),
            Path::new("/run/state/elect"),
            Path::new("/run/second"),
        );
        c.set_launch(
            1,
            SlotLaunch {
                reach: Some(reach),
                nested: false,
                escape: true,
            },
        );
        let spelled = args(&c.command(1, "c1.1").expect("a command"));
        assert_eq!(
            spelled[..5],
            ["unshare", "-m", "--propagation", "private", "sh"]
        );
        assert!(spelled[6].starts_with("mount --bind '/run/state/elect' '/run/second' && exec"));
        assert_eq!(spelled[7..9], ["/bin/elect", "run"]);
        assert_eq!(spelled[9..11], ["--backend", "file:///run/second"]);
        assert!(spelled.contains(&"--escape".to_owned()), "{spelled:?}");
        c.set_launch(
            1,
            SlotLaunch {
                reach: None,
                nested: true,
                escape: false,
            },
        );
        let nested = args(&c.command(1, "c1.2").expect("a command"));
        let inner = nested
            .iter()
            .position(|a| a == "sh")
            .expect("the nesting shell");
        assert_eq!(nested[inner + 3..inner + 5], ["/bin/elect", "run"]);
        assert!(nested[inner + 2].starts_with(&format!("{OUTER_TOKEN}=\"$ELECTION_TOKEN\"")));
        assert!(nested.contains(&inner_election(1)), "{nested:?}");
        assert!(nested.windows(2).any(|w| w == ["--token-env", OUTER_TOKEN]));
    }

    #[test]
    fn a_child_and_a_command_line_are_found_in_proc() {
        let word = format!("torture-test-word-{}", std::process::id());
        // `sh -c CMD NAME`: NAME is an argument of the shell's own.
        // `read` is the shell's own: no grandchild outlives the kill.
        let mut child = std::process::Command::new("sh")
            .args(["-c", "read line", &word])
            .stdin(std::process::Stdio::piped())
            .spawn()
            .expect("spawn sh");
        let pid = i32::try_from(child.id()).expect("pid");
        let me = i32::try_from(std::process::id()).expect("pid");
        let children = children_of(me);
        // Until the child has exec'd `sh`, its command line is still this
        // test binary's: wait for the exec (CI once read it in between).
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        let mut named = processes_naming(&word);
        while named.is_empty() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(5));
            named = processes_naming(&word);
        }
        let _ = child.kill();
        let _ = child.wait();
        assert!(children.contains(&pid), "{children:?}");
        assert_eq!(named, vec![pid]);
        assert!(processes_naming("no-process-has-this-argument").is_empty());
    }
}
