//! A cluster of `nats-server` nodes with clustered JetStream.

use std::collections::BTreeSet;
use std::thread;
use std::time::Instant;

use crate::server::{self, ClusterConfig, NodeConfig, POLL_INTERVAL, READY_TIMEOUT};
use crate::{Error, Server, monitor, nats_server_bin, placement, ports};

/// The `cluster.name` of every cluster this crate starts.
const CLUSTER_NAME: &str = "nats-testkit";

/// Nodes `n1`, `n2`, ... on 127.0.0.1, routed to each other, with clustered
/// JetStream.
///
/// Node indexes start at 0: `node(0)` is `n1`. Methods taking an index panic
/// if it is out of range, like slice indexing. Dropping the cluster kills
/// every node and removes their temp directories.
#[derive(Debug)]
pub struct Cluster {
    nodes: Vec<Server>,
}

impl Cluster {
    /// Starts `size` nodes on free ports and waits (up to 30 s) until each
    /// accepts clients and is healthy, every node has routes to every other,
    /// all agree on a JetStream meta leader, and the meta leader can place a
    /// stream with one replica on every node (until it has every peer's
    /// statistics it refuses with "no suitable peers for placement").
    ///
    /// # Panics
    ///
    /// If `size` is less than 2 (clustered JetStream needs peers; use
    /// [`Server::start`] for one node).
    pub fn start(size: usize) -> Result<Self, Error> {
        assert!(size >= 2, "a cluster needs at least 2 nodes, got {size}");
        let bin = nats_server_bin()?;
        ports::retry_on_clash(|| {
            let ports = ports::free(3 * size)?;
            let (client, rest) = ports.split_at(size);
            let (monitor, route) = rest.split_at(size);
            let nodes = (0..size)
                .map(|i| {
                    let config = NodeConfig {
                        name: format!("n{}", i + 1),
                        client_port: client[i],
                        monitor_port: monitor[i],
                        cluster: Some(ClusterConfig {
                            name: CLUSTER_NAME.to_owned(),
                            port: route[i],
                            routes: route.to_vec(),
                        }),
                        auth: None,
                        jetstream: true,
                    };
                    Server::spawn(bin.clone(), config)
                })
                .collect::<Result<Vec<_>, _>>()?;
            let mut cluster = Self { nodes };
            let deadline = Instant::now() + READY_TIMEOUT;
            server::wait_all_ready(&mut cluster.nodes, deadline)?;
            cluster.wait_settled(deadline)?;
            Ok(cluster)
        })
    }

    /// All nodes, `n1` first.
    pub fn nodes(&self) -> &[Server] {
        &self.nodes
    }

    /// Node `i` (0-based: `node(0)` is `n1`).
    pub fn node(&self, i: usize) -> &Server {
        &self.nodes[i]
    }

    /// Node `i`, mutably (to [`pause`](Server::pause) it, say).
    pub fn node_mut(&mut self, i: usize) -> &mut Server {
        &mut self.nodes[i]
    }

    /// The node with this server name, if any.
    pub fn node_by_name(&self, name: &str) -> Option<&Server> {
        self.nodes.iter().find(|n| n.name() == name)
    }

    /// The index of the node with this server name, if any.
    pub fn index_of(&self, name: &str) -> Option<usize> {
        self.nodes.iter().position(|n| n.name() == name)
    }

    /// The client URLs of all nodes (running or not), for a client that
    /// should fail over between them: `async_nats::connect(cluster.urls())`.
    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(Server::url).collect()
    }

    /// Kills node `i` with `SIGKILL` (see [`Server::kill`]).
    pub fn kill(&mut self, i: usize) -> Result<(), Error> {
        self.nodes[i].kill()
    }

    /// Restarts node `i` (see [`Server::restart`]), then waits until the
    /// running nodes are routed to each other again and agree on a meta
    /// leader, and, when every node runs, until a stream can be placed on
    /// all of them.
    pub fn restart(&mut self, i: usize) -> Result<(), Error> {
        self.nodes[i].restart()?;
        self.wait_settled(Instant::now() + READY_TIMEOUT)
    }

    /// The name of the JetStream meta leader, asked once of every running,
    /// unpaused node: they must all name the same node, and it must be one
    /// of them.
    pub fn meta_leader(&self) -> Result<String, Error> {
        let live: Vec<&Server> = self.nodes.iter().filter(|n| n.is_live()).collect();
        let mut leaders = BTreeSet::new();
        let mut all_know = true;
        let mut seen = Vec::new();
        for node in &live {
            match leader_seen_by(node) {
                Ok(Some(leader)) => {
                    seen.push(format!("{} says {leader}", node.name()));
                    leaders.insert(leader);
                }
                Ok(None) => {
                    all_know = false;
                    seen.push(format!("{} knows no leader", node.name()));
                }
                Err(e) => {
                    all_know = false;
                    seen.push(e);
                }
            }
        }
        match Vec::from_iter(leaders).as_slice() {
            [leader] if all_know && live.iter().any(|n| n.name() == leader) => Ok(leader.clone()),
            _ => Err(Error::NoMetaLeader(seen.join(", "))),
        }
    }

    /// Polls [`meta_leader`](Self::meta_leader) for up to 30 s, e.g. after
    /// killing the leader; returns the leader's name.
    pub fn wait_for_meta_leader(&self) -> Result<String, Error> {
        self.wait_for_meta_leader_until(Instant::now() + READY_TIMEOUT)
    }

    fn wait_for_meta_leader_until(&self, deadline: Instant) -> Result<String, Error> {
        poll(deadline, "a JetStream meta leader", || {
            self.meta_leader().map_err(|e| e.to_string())
        })
    }

    /// Waits until every running node has routes to every other one, then
    /// for an agreed meta leader, then (when every node runs) until a
    /// stream with one replica per node can be placed.
    fn wait_settled(&self, deadline: Instant) -> Result<(), Error> {
        poll(deadline, "routes between all running nodes", || {
            self.check_routes()
        })?;
        self.wait_for_meta_leader_until(deadline)?;
        if self.nodes.iter().all(Server::is_live) {
            let port = self.nodes[0].client_port();
            let replicas = self.nodes.len();
            poll(deadline, "a stream placed on every node", || {
                placement::probe(port, replicas)
            })?;
        }
        Ok(())
    }

    fn check_routes(&self) -> Result<(), String> {
        let live: Vec<&Server> = self.nodes.iter().filter(|n| n.is_live()).collect();
        for node in &live {
            let (_, body) = monitor::get(node.monitor_port(), "/routez")
                .map_err(|e| format!("{}: /routez failed: {e}", node.name()))?;
            let routed: BTreeSet<&str> = monitor::field(&body, "routes")
                .and_then(monitor::items)
                .unwrap_or_default()
                .into_iter()
                .filter_map(|r| monitor::field(r, "remote_name").and_then(monitor::string))
                .collect();
            if let Some(missing) = live
                .iter()
                .find(|o| o.name() != node.name() && !routed.contains(o.name()))
            {
                return Err(format!(
                    "{} has no route to {} (has {routed:?})",
                    node.name(),
                    missing.name()
                ));
            }
        }
        Ok(())
    }
}

/// The meta leader's name as `node` sees it (`meta_cluster.leader` of
/// `/jsz`); `None` while it knows none.
fn leader_seen_by(node: &Server) -> Result<Option<String>, String> {
    match monitor::get(node.monitor_port(), "/jsz") {
        Ok((200, body)) => Ok(monitor::field(&body, "meta_cluster")
            .and_then(|meta| monitor::field(meta, "leader"))
            .and_then(monitor::string)
            .filter(|leader| !leader.is_empty())
            .map(str::to_owned)),
        Ok((status, _)) => Err(format!("{}: /jsz answered {status}", node.name())),
        Err(e) => Err(format!("{}: /jsz failed: {e}", node.name())),
    }
}

/// Calls `check` every [`POLL_INTERVAL`] until it succeeds or `deadline`
/// passes.
fn poll<T>(
    deadline: Instant,
    what: &str,
    mut check: impl FnMut() -> Result<T, String>,
) -> Result<T, Error> {
    let start = Instant::now();
    loop {
        match check() {
            Ok(value) => return Ok(value),
            Err(last) if Instant::now() >= deadline => {
                return Err(Error::Timeout {
                    what: what.to_owned(),
                    waited: start.elapsed(),
                    last,
                });
            }
            Err(_) => thread::sleep(POLL_INTERVAL),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::net::TcpListener;
    use std::time::Duration;

    use super::*;

    /// A node whose route port another process took between picking and
    /// binding exits; the start must say so (a port clash, which the start
    /// retries with fresh ports) instead of the first node waiting out its
    /// deadline for a peer that is gone ("not ready in time", which no
    /// retry follows: seen in CI under load).
    #[test]
    fn a_node_that_cannot_bind_its_route_port_fails_the_start_as_a_clash() {
        let bin = nats_server_bin().expect("nats-server");
        let taken = TcpListener::bind("127.0.0.1:0").expect("a port");
        let ports = ports::free(8).expect("free ports");
        let taken_port = taken.local_addr().expect("its port").port();
        let routes = vec![ports[6], ports[7], taken_port];
        let nodes = (0..3)
            .map(|i| {
                Server::spawn(
                    bin.clone(),
                    NodeConfig {
                        name: format!("n{}", i + 1),
                        client_port: ports[i],
                        monitor_port: ports[3 + i],
                        cluster: Some(ClusterConfig {
                            name: CLUSTER_NAME.to_owned(),
                            port: routes[i],
                            routes: routes.clone(),
                        }),
                        auth: None,
                        jetstream: true,
                    },
                )
                .expect("spawned")
            })
            .collect();
        let mut cluster = Cluster { nodes };
        let started = Instant::now();
        let e = server::wait_all_ready(&mut cluster.nodes, started + Duration::from_secs(30))
            .expect_err("n3 cannot listen for routes");
        assert!(e.is_port_clash(), "{e}");
        drop(taken);
    }
}
