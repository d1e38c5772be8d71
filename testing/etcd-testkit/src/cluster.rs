//! [`Cluster`]: etcd members that form one cluster.

use crate::{Error, Member, gateway, ports};

/// A cluster of etcd members on 127.0.0.1 (three for a quorum that
/// survives one member down).
#[derive(Debug)]
pub struct Cluster {
    members: Vec<Member>,
}

impl Cluster {
    /// Starts `size` members and waits until each is healthy.
    ///
    /// ```no_run
    /// let mut cluster = etcd_testkit::Cluster::start(3).expect("etcd");
    /// let endpoints = cluster.endpoints().join(","); // for EtcdElection::connect
    /// let leader = cluster.leader().expect("a leader");
    /// cluster.member_mut(leader).kill().expect("killed");
    /// # drop(endpoints);
    /// ```
    pub fn start(size: usize) -> Result<Cluster, Error> {
        ports::retry_on_clash(|| {
            let p = ports::free(2 * size)?;
            let names: Vec<String> = (1..=size).map(|i| format!("m{i}")).collect();
            let initial = names
                .iter()
                .enumerate()
                .map(|(i, n)| format!("{n}=http://127.0.0.1:{}", p[2 * i + 1]))
                .collect::<Vec<_>>()
                .join(",");
            let mut members = Vec::with_capacity(size);
            for (i, name) in names.iter().enumerate() {
                let mut m = Member::new(name.clone(), p[2 * i], p[2 * i + 1], initial.clone())?;
                m.spawn()?;
                members.push(m);
            }
            for m in &mut members {
                m.wait_ready()?;
            }
            Ok(Cluster { members })
        })
    }

    /// Every member's client address.
    ///
    /// ```no_run
    /// let cluster = etcd_testkit::Cluster::start(3).expect("etcd");
    /// assert_eq!(cluster.endpoints().len(), 3);
    /// ```
    pub fn endpoints(&self) -> Vec<String> {
        self.members.iter().map(Member::endpoint).collect()
    }

    /// The members.
    ///
    /// ```no_run
    /// let cluster = etcd_testkit::Cluster::start(3).expect("etcd");
    /// assert_eq!(cluster.members()[0].name(), "m1");
    /// ```
    pub fn members(&self) -> &[Member] {
        &self.members
    }

    /// Member `i`, to kill, stop, pause or restart.
    ///
    /// ```no_run
    /// let mut cluster = etcd_testkit::Cluster::start(3).expect("etcd");
    /// cluster.member_mut(0).restart().expect("back");
    /// ```
    pub fn member_mut(&mut self, i: usize) -> &mut Member {
        &mut self.members[i]
    }

    /// The index of the member that leads the cluster now (asked of the
    /// first member that answers).
    ///
    /// ```no_run
    /// let cluster = etcd_testkit::Cluster::start(3).expect("etcd");
    /// assert!(cluster.leader().expect("a leader") < 3);
    /// ```
    pub fn leader(&self) -> Result<usize, Error> {
        let mut last = None;
        for m in &self.members {
            match gateway::status(&m.endpoint()) {
                Ok((member, leader)) if leader != 0 => {
                    // `member` names the one that answered; find the leader
                    // by asking each for its own id.
                    if member == leader {
                        return Ok(self.index_of(&m.endpoint()));
                    }
                    for (i, other) in self.members.iter().enumerate() {
                        if let Ok((id, _)) = gateway::status(&other.endpoint())
                            && id == leader
                        {
                            return Ok(i);
                        }
                    }
                }
                Ok(_) => {}
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| Error::Gateway {
            endpoint: self.endpoints().join(","),
            path: "/v3/maintenance/status".into(),
            answer: "no leader".into(),
        }))
    }

    fn index_of(&self, endpoint: &str) -> usize {
        self.members
            .iter()
            .position(|m| m.endpoint() == endpoint)
            .unwrap_or(0)
    }
}
