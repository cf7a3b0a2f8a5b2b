//! A virtual cluster of K nodes made of real Linux network namespaces, built with iproute2.
//!
//! ```text
//!   rlab-<id>-n0 (node 0)          rlab-<id>-sw (switch)          rlab-<id>-n1 (node 1)
//!   lo 127.0.0.1                   br0 ── n0, n1 (veth ends)      lo 127.0.0.1
//!   eth0 10.77.0.1/24 ── veth ──▶                       ◀── veth ── eno1 10.77.0.2/24
//!   docker0 172.17.0.1/16 (no ports, like Docker's)               docker0 172.17.0.1/16
//! ```
//! Everything is named `rlab-…` and removed on drop; `ringlab lab cleanup` removes what a
//! crashed run left behind.

use std::fs::File;
use std::net::{IpAddr, Ipv4Addr};
use std::os::fd::AsRawFd;
use std::process::Command;

use crate::comm::ifaces::{self, Iface};

pub const PREFIX: &str = "rlab-";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    pub index: usize,
    pub netns: String,
    /// The fabric interface's name on this node (eth0, or eno1 where names differ).
    pub fabric: String,
    pub ip: Ipv4Addr,
}

#[derive(Debug)]
pub struct Cluster {
    pub id: String,
    pub nodes: Vec<Node>,
    /// The iproute2 commands that built it, to show the learner.
    pub commands: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error("`{cmd}` failed: {err}")]
    Command { cmd: String, err: String },
    #[error("network namespaces are not available here ({0}); run as root")]
    Unavailable(String),
    #[error("entering {ns}: {err}")]
    Setns { ns: String, err: String },
}

fn ip(args: &[&str], log: &mut Vec<String>) -> Result<(), ClusterError> {
    let cmd = format!("ip {}", args.join(" "));
    let out = Command::new("ip").args(args).output().map_err(|e| ClusterError::Command { cmd: cmd.clone(), err: e.to_string() })?;
    if !out.status.success() {
        return Err(ClusterError::Command { cmd, err: String::from_utf8_lossy(&out.stderr).trim().to_string() });
    }
    log.push(cmd);
    Ok(())
}

/// Can this process make network namespaces? (Root, with iproute2.)
pub fn available() -> Result<(), ClusterError> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err(ClusterError::Unavailable("not root".into()));
    }
    let probe = format!("{PREFIX}probe-{}", std::process::id());
    let mut log = Vec::new();
    ip(&["netns", "add", &probe], &mut log).map_err(|e| ClusterError::Unavailable(e.to_string()))?;
    let _ = ip(&["netns", "del", &probe], &mut log);
    Ok(())
}

impl Cluster {
    /// Build K nodes; `fabric_names[i]` names node i's fabric NIC (default eth0).
    pub fn create(k: usize, fabric_names: &[String]) -> Result<Self, ClusterError> {
        let id = format!("{}", std::process::id() % 100000);
        let mut c = Cluster { id: id.clone(), nodes: Vec::new(), commands: Vec::new() };
        let sw = format!("{PREFIX}{id}-sw");
        let log = &mut c.commands;
        ip(&["netns", "add", &sw], log)?;
        ip(&["-n", &sw, "link", "add", "br0", "type", "bridge"], log)?;
        ip(&["-n", &sw, "link", "set", "br0", "up"], log)?;
        for i in 0..k {
            let ns = format!("{PREFIX}{id}-n{i}");
            let fabric = fabric_names.get(i).cloned().unwrap_or_else(|| "eth0".into());
            let addr = Ipv4Addr::new(10, 77, 0, i as u8 + 1);
            let port = format!("n{i}");
            ip(&["netns", "add", &ns], log)?;
            ip(&["-n", &ns, "link", "set", "lo", "up"], log)?;
            ip(&["link", "add", &fabric, "netns", &ns, "type", "veth", "peer", "name", &port, "netns", &sw], log)?;
            ip(&["-n", &sw, "link", "set", &port, "master", "br0"], log)?;
            ip(&["-n", &sw, "link", "set", &port, "up"], log)?;
            ip(&["-n", &ns, "addr", "add", &format!("{addr}/24"), "dev", &fabric], log)?;
            ip(&["-n", &ns, "link", "set", &fabric, "up"], log)?;
            // The trap: a docker0 bridge with the same address on every node, as Docker makes.
            ip(&["-n", &ns, "link", "add", "docker0", "type", "bridge"], log)?;
            ip(&["-n", &ns, "addr", "add", "172.17.0.1/16", "dev", "docker0"], log)?;
            ip(&["-n", &ns, "link", "set", "docker0", "up"], log)?;
            c.nodes.push(Node { index: i, netns: ns, fabric, ip: addr });
        }
        Ok(c)
    }

    pub fn netns_path(&self, node: usize) -> Option<String> {
        self.nodes.get(node).map(|n| format!("/var/run/netns/{}", n.netns))
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let mut log = Vec::new();
        for n in &self.nodes {
            let _ = ip(&["netns", "del", &n.netns], &mut log);
        }
        let _ = ip(&["netns", "del", &format!("{PREFIX}{}-sw", self.id)], &mut log);
    }
}

/// Remove every ringlab namespace (after a crash). Returns what was removed.
pub fn cleanup_all() -> Vec<String> {
    let Ok(out) = Command::new("ip").args(["netns", "list"]).output() else { return Vec::new() };
    let mut removed = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let name = line.split_whitespace().next().unwrap_or("");
        if name.starts_with(PREFIX) {
            let mut log = Vec::new();
            if ip(&["netns", "del", name], &mut log).is_ok() {
                removed.push(name.to_string());
            }
        }
    }
    removed
}

/// Run `f` on a fresh thread that has entered `netns` (sockets it makes live there).
pub fn in_netns<T: Send + 'static>(netns_path: &str, f: impl FnOnce() -> T + Send + 'static) -> Result<T, ClusterError> {
    let path = netns_path.to_string();
    std::thread::spawn(move || -> Result<T, ClusterError> {
        enter(&path)?;
        Ok(f())
    })
    .join()
    .map_err(|_| ClusterError::Setns { ns: netns_path.into(), err: "thread panicked".into() })?
}

/// setns(2) the calling thread into a network namespace.
pub fn enter(netns_path: &str) -> Result<(), ClusterError> {
    let f = File::open(netns_path).map_err(|e| ClusterError::Setns { ns: netns_path.into(), err: e.to_string() })?;
    // SAFETY: f is an open namespace file; setns affects only the calling thread.
    if unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        return Err(ClusterError::Setns { ns: netns_path.into(), err: std::io::Error::last_os_error().to_string() });
    }
    Ok(())
}

/// A node's interface table, as NCCL would see it.
pub fn interfaces(netns_path: &str) -> Result<Vec<Iface>, ClusterError> {
    in_netns(netns_path, ifaces::list)?.map_err(|e| ClusterError::Setns { ns: netns_path.into(), err: e.to_string() })
}

/// Can a TCP connection from inside `netns_path` reach `addr`? "ok" or the errno, NCCL-style.
pub fn probe(netns_path: &str, addr: std::net::SocketAddr) -> String {
    in_netns(netns_path, move || match std::net::TcpStream::connect_timeout(&addr, std::time::Duration::from_millis(1500)) {
        Ok(_) => "ok".to_string(),
        Err(e) => crate::comm::net::describe(&e),
    })
    .unwrap_or_else(|e| e.to_string())
}

pub fn is_fabric(ip: &IpAddr) -> bool {
    matches!(ip, IpAddr::V4(v) if v.octets()[..3] == [10, 77, 0])
}
