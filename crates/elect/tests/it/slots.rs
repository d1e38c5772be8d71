//! `elect run --slots N` end to end (issue 25, ADR 0062): real `elect`
//! processes hold the slots of one name; the commands themselves check that
//! no slot has two holders (a kernel lock per slot, taken with `flock -n`)
//! and that at most N of them run at once (a file per running command,
//! counting only live processes); one holder is killed with SIGKILL and
//! its slot is taken over in a later term.

use crate::common;

use std::path::Path;
use std::time::Duration;

use common::{CONFIG, NOT_ELECTED, PATIENCE, Setup, USAGE, once};
use nix::sys::signal::Signal;

/// The command each `elect run --slots 2` runs (`$1`: the shared
/// directory, `$2`: the most commands allowed at once). It records a
/// violation in `$1/violations` when its slot's kernel lock is already
/// taken (two holders of one slot) or when more than `$2` commands are
/// alive (its own `running/PID` file and the others', dead ones not
/// counted: a SIGKILLed command leaves its file behind), at start and
/// every 50 ms; it logs `start SLOT EPOCH IDENTITY NAME TOKEN PID` and runs
/// until `$1/stop` exists.
const HOLDER: &str = r#"dir="$1"; max="$2"
exec 9>"$dir/slot-$ELECTION_SLOT.lock"
if ! flock -n 9; then echo "slot $ELECTION_SLOT has two holders ($ELECTION_IDENTITY)" >> "$dir/violations"; fi
echo > "$dir/running/$$"
count() {
  n=0
  for f in "$dir"/running/*; do
    p=${f##*/}
    if kill -0 "$p" 2>/dev/null; then n=$((n+1)); fi
  done
  if [ "$n" -gt "$max" ]; then echo "$n commands at once ($ELECTION_IDENTITY)" >> "$dir/violations"; fi
}
count
echo "start $ELECTION_SLOT $ELECTION_EPOCH $ELECTION_IDENTITY $ELECTION_NAME $ELECTION_TOKEN $$" >> "$dir/log"
while [ ! -e "$dir/stop" ]; do count; sleep 0.05; done
rm -f "$dir/running/$$""#;

/// One `start` line of the log.
#[derive(Clone, Debug)]
struct Start {
    slot: u32,
    epoch: u64,
    identity: String,
    name: String,
    token: String,
}

fn starts(dir: &Path) -> Vec<Start> {
    let text = std::fs::read_to_string(dir.join("log")).unwrap_or_default();
    text.lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            (w.len() == 7 && w[0] == "start").then(|| Start {
                slot: w[1].parse().expect("slot"),
                epoch: w[2].parse().expect("epoch"),
                identity: w[3].to_owned(),
                name: w[4].to_owned(),
                token: w[5].to_owned(),
            })
        })
        .collect()
}

async fn until_starts(dir: &Path, n: usize) -> Vec<Start> {
    tokio::time::timeout(PATIENCE, async {
        loop {
            let s = starts(dir);
            if s.len() >= n {
                return s;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("{n} commands did not start; log: {:?}", starts(dir)))
}

fn violations(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("violations")).unwrap_or_default()
}

/// Three `elect run --slots 2`: two commands run, the third waits; the
/// first holder's `elect` is SIGKILLed and the third takes its slot in a
/// later term; no command ever saw a second holder of its slot or three
/// commands alive.
async fn three_holders_of_two_slots(b: &Setup) {
    let dir = b.dir.path().join("shared");
    std::fs::create_dir_all(dir.join("running")).expect("dir");
    let command: Vec<String> = ["sh", "-c", HOLDER, "sh", dir.to_str().expect("utf-8"), "2"]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
    let name = "pool";
    let mut elects: Vec<_> = ["a", "b", "c"]
        .iter()
        .map(|id| (*id, b.run(name, id, &["--slots", "2"], &command)))
        .collect();
    let first = until_starts(&dir, 2).await;
    let (h0, h1) = (first[0].clone(), first[1].clone());
    assert_ne!(h0.slot, h1.slot, "two holders of one slot: {first:?}");
    for s in [&h0, &h1] {
        assert!(s.slot < 2, "slot {} of 2", s.slot);
        assert_eq!(s.name, name, "ELECTION_NAME is the name given");
        assert_eq!(
            s.token,
            s.epoch.to_string(),
            "the token is the slot's epoch"
        );
    }
    let waiting = ["a", "b", "c"]
        .into_iter()
        .find(|id| *id != h0.identity && *id != h1.identity)
        .expect("a third");
    // The third campaigns and is not elected while both slots are held:
    // `elect leader --slots 2` shows the two holders.
    let seen = once(&[
        "leader",
        "--backend",
        &b.url,
        "--name",
        name,
        "--slots",
        "2",
    ])
    .await;
    assert_eq!(seen.code, 0, "{seen:?}");
    assert_eq!(
        seen.stdout.last().map(String::as_str),
        Some("pool: 2 of 2 slots held"),
        "{seen:?}"
    );
    assert!(
        seen.stdout.iter().any(|l| l.contains(&format!(
            "slot {}: held by {} in term {}",
            h0.slot, h0.identity, h0.epoch
        ))),
        "{seen:?}"
    );
    assert_eq!(
        starts(&dir).len(),
        2,
        "a third command started: {:?}",
        starts(&dir)
    );

    // SIGKILL to the first holder's elect: its supervisor kills the
    // command, and the third takes the slot in a later term.
    let victim = elects
        .iter()
        .position(|(id, _)| *id == h0.identity)
        .expect("the first holder");
    let (_, killed) = elects.remove(victim);
    killed.signal(Signal::SIGKILL);
    assert_eq!(killed.killed().await, Signal::SIGKILL as i32);
    let all = until_starts(&dir, 3).await;
    let taken = &all[2];
    assert_eq!(taken.identity, waiting, "{all:?}");
    assert_eq!(
        taken.slot, h0.slot,
        "the third takes the freed slot: {all:?}"
    );
    assert!(
        taken.epoch > h0.epoch,
        "slot {}: term {} after term {}",
        taken.slot,
        taken.epoch,
        h0.epoch
    );

    // Every command ends; each elect exits with its code (0).
    std::fs::write(dir.join("stop"), "").expect("stop");
    for (id, e) in elects {
        let done = e.finish().await;
        assert_eq!(done.code, 0, "{id}: {done:?}");
    }
    let v = violations(&dir);
    assert!(v.is_empty(), "the commands saw: {v}");
}

/// Bad `--slots`: 0 and above the cap are usage errors (64); a name held
/// without slots refuses `--slots` (78), and a name held with slots
/// refuses a run without them (78); `--no-wait` on full slots is 75.
async fn bad_slots(b: &Setup) {
    let report = b.report("shape");
    for bad in ["0", "65", "x"] {
        let done = b
            .run_to_end("shape", "a", &["--slots", bad], &report.once())
            .await;
        assert_eq!(done.code, USAGE, "--slots {bad}: {done:?}");
    }
    let dir = b.dir.path().join("shape");
    std::fs::create_dir_all(dir.join("running")).expect("dir");
    let hold: Vec<String> = ["sh", "-c", HOLDER, "sh", dir.to_str().expect("utf-8"), "1"]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
    // Held without slots: --slots is refused.
    let mut plain = b.run("shape", "plain", &[], &hold_plain(&dir));
    plain.err_with("started").await;
    let done = b
        .run_to_end("shape", "b", &["--slots", "2"], &report.once())
        .await;
    assert_eq!(done.code, CONFIG, "{done:?}");
    done.err_line("without slots");
    std::fs::write(dir.join("stop"), "").expect("stop");
    assert_eq!(plain.finish().await.code, 0);
    std::fs::remove_file(dir.join("stop")).expect("rm stop");

    // Held with one slot: a run without slots is refused, --no-wait on
    // the full slot is 75.
    let mut slotted = b.run("shape", "s", &["--slots", "1"], &hold);
    slotted.err_with("started").await;
    let done = b.run_to_end("shape", "c", &[], &report.once()).await;
    assert_eq!(done.code, CONFIG, "{done:?}");
    done.err_line("used with --slots");
    // Issue 43, item 7: `elect leader` without --slots does not say "no
    // leader" of a name whose slot is held; it is refused as the run is.
    let seen = once(&["leader", "--backend", &b.url, "--name", "shape"]).await;
    assert_eq!(seen.code, CONFIG, "{seen:?}");
    assert!(seen.stdout.is_empty(), "{seen:?}");
    assert!(
        seen.stderr.iter().any(|l| l.contains("used with --slots")),
        "{seen:?}"
    );
    let done = b
        .run_to_end("shape", "c", &["--slots", "1", "--no-wait"], &report.once())
        .await;
    assert_eq!(done.code, NOT_ELECTED, "{done:?}");
    done.err_line("1 of the 1 slots of shape are held");
    std::fs::write(dir.join("stop"), "").expect("stop");
    assert_eq!(slotted.finish().await.code, 0);
}

/// Issue 40, item 4: a run without slots reads every slot, not only slot
/// 0: with slot 0's holder gone and slot 1 still held, it is refused (78)
/// rather than starting beside slot 1's holder.
#[tokio::test]
async fn file_a_plain_run_is_refused_while_a_slot_above_0_is_held() {
    let b = Setup::file();
    let dir = b.dir.path().join("gap");
    std::fs::create_dir_all(&dir).expect("dir");
    let until = |stop: &str| -> Vec<String> {
        let script = format!(r#"while [ ! -e "$1/{stop}" ]; do sleep 0.05; done"#);
        ["sh", "-c", &script, "sh", dir.to_str().expect("utf-8")]
            .map(str::to_owned)
            .to_vec()
    };
    let mut s0 = b.run("gap", "s0", &["--slots", "2"], &until("stop-0"));
    s0.err_with("slot 0").await;
    s0.err_with("started").await;
    let mut s1 = b.run("gap", "s1", &["--slots", "2"], &until("stop-1"));
    s1.err_with("slot 1").await;
    s1.err_with("started").await;
    std::fs::write(dir.join("stop-0"), "").expect("stop slot 0");
    assert_eq!(s0.finish().await.code, 0);
    let report = b.report("gap");
    let done = b
        .run_to_end("gap", "plain", &["--no-wait"], &report.once())
        .await;
    assert_eq!(done.code, CONFIG, "{done:?}");
    done.err_line("its slot 1 (gap#slot-1) is held by s1");
    std::fs::write(dir.join("stop-1"), "").expect("stop slot 1");
    assert_eq!(s1.finish().await.code, 0);
}

/// A command holding a name without slots until `$dir/stop` exists.
fn hold_plain(dir: &Path) -> Vec<String> {
    let script = r#"while [ ! -e "$1/stop" ]; do sleep 0.05; done"#;
    ["sh", "-c", script, "sh", dir.to_str().expect("utf-8")]
        .iter()
        .map(|s| (*s).to_owned())
        .collect()
}

#[tokio::test]
async fn file_three_holders_of_two_slots() {
    three_holders_of_two_slots(&Setup::file()).await;
}

#[tokio::test]
async fn sqlite_three_holders_of_two_slots() {
    three_holders_of_two_slots(&Setup::sqlite()).await;
}

#[tokio::test]
async fn file_bad_slots_are_refused() {
    bad_slots(&Setup::file()).await;
}

#[tokio::test]
async fn nats_three_holders_of_two_slots() {
    let server = nats_testkit::Server::start().expect("nats-server");
    let setup = Setup::nats(&server.url(), &["--ttl", "3s", "--grace", "1s"]);
    three_holders_of_two_slots(&setup).await;
}

#[tokio::test]
async fn postgres_three_holders_of_two_slots() {
    let server = postgres_testkit::Server::start()
        .expect("a PostgreSQL server (apt-get install -y postgresql)");
    let setup = Setup {
        url: format!("{}?schema=elect_slots", server.url()),
        timing: vec!["--ttl".into(), "3s".into()],
        hold_window: Duration::from_secs(4),
        dir: common::temp_dir(),
    };
    three_holders_of_two_slots(&setup).await;
}

/// `elect observe --slots 2`: every slot's state first, then each change
/// of a slot as it happens, with the slot's number.
#[tokio::test]
async fn file_observe_shows_each_slot() {
    let b = Setup::file();
    let dir = b.dir.path().join("observed");
    std::fs::create_dir_all(dir.join("running")).expect("dir");
    let mut observe = common::Elect::spawn(
        &[
            "observe",
            "--backend",
            &b.url,
            "--name",
            "seen",
            "--slots",
            "2",
            "--poll",
            "100ms",
        ],
        "observe --slots 2",
    );
    let mut first = vec![observe.out_line().await, observe.out_line().await];
    first.sort();
    assert_eq!(first, ["seen: slot 0: free", "seen: slot 1: free"]);
    let hold: Vec<String> = ["sh", "-c", HOLDER, "sh", dir.to_str().expect("utf-8"), "2"]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
    let holder = b.run("seen", "a", &["--slots", "2"], &hold);
    let started = until_starts(&dir, 1).await;
    let line = observe.out_line().await;
    let held = format!("seen: slot 0: held by a in term {}", started[0].epoch);
    assert!(line.starts_with(&held), "{line}");
    std::fs::write(dir.join("stop"), "").expect("stop");
    assert_eq!(holder.finish().await.code, 0);
    assert_eq!(observe.out_line().await, "seen: slot 0: free");
}
