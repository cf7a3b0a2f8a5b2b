//! A virtual cluster of K nodes made of real Linux network namespaces, built with iproute2,
//! or, where namespaces cannot be made, the emulated cluster of [`crate::comm::emu::vnet`].
//!
//! ```text
//!   rlab-<id>-n0 (node 0)          rlab-<id>-sw (switch)          rlab-<id>-n1 (node 1)
//!   lo 127.0.0.1                   br0 ── n0, n1 (veth ends)      lo 127.0.0.1
//!   eth0 10.77.0.1/24 ── veth ──▶                       ◀── veth ── eno1 10.77.0.2/24
//!   docker0 172.17.0.1/16 (no ports, like Docker's)               docker0 172.17.0.1/16
//! ```
//! Everything is named `rlab-…` and removed on drop; `ringlab lab cleanup` removes what a
//! crashed run left behind.

use crate::lab::hang::scenario::Reached;
use std::fs::File;
use std::net::{IpAddr, Ipv4Addr};
use std::os::fd::AsRawFd;
use std::process::Command;

use crate::comm::cpu::ifaces::{self, Iface};
use crate::comm::cpu::pace::{Rate, Shape};
use crate::comm::emu::vnet::{self, VNet};

pub const PREFIX: &str = "rlab-";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    pub index: usize,
    /// `/proc/<pid>/ns/net` of the process holding this node's namespace (none when emulated).
    pub netns: Option<String>,
    /// The fabric interface's name on this node (eth0, or eno1 where names differ).
    pub fabric: String,
    pub ip: Ipv4Addr,
    /// `/proc/<pid>/ns/mnt` of the holder when the node has a /dev/shm of its own.
    pub mntns: Option<String>,
    /// `/proc/<pid>/ns/uts` of the holder: the node's own host name (none when emulated).
    pub utsns: Option<String>,
    /// The node's host name, `n0`, `n1`, …: what its ranks' log lines start with.
    pub hostname: String,
}

/// Node i's host name.
pub fn node_hostname(i: usize) -> String {
    format!("n{i}")
}

/// A process that owns one network namespace: it unshares, then waits. When it dies (with the
/// launcher, through its parent-death signal, even after a SIGKILL) the namespace and every
/// link in it go away: nothing can be left behind.
struct Holder {
    child: std::process::Child,
    /// Replies to commands (a node with a /dev/shm of its own takes `shm-size` and `ipc-host`).
    replies: Option<std::io::BufReader<std::process::ChildStdout>>,
}

impl Holder {
    /// `shm`: also a mount namespace with a tmpfs of that size over /dev/shm (a container's
    /// private /dev/shm, as `docker run` makes one: 64 MB unless --shm-size or --ipc=host).
    /// `hostname`: also a UTS namespace with that host name (a node's).
    fn spawn(shm: Option<&str>, hostname: Option<&str>) -> Result<Self, ClusterError> {
        use std::io::BufRead;
        let exe = crate::lab::self_exe().map_err(|e| ClusterError::Unavailable(e.to_string()))?;
        let mut cmd = Command::new(exe);
        cmd.arg("__netns-holder");
        if let Some(size) = shm {
            cmd.args(["--shm", size]);
        }
        if let Some(h) = hostname {
            cmd.args(["--hostname", h]);
        }
        let mut child = cmd
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .map_err(|e| ClusterError::Unavailable(e.to_string()))?;
        let mut line = String::new();
        let mut replies = child.stdout.take().map(std::io::BufReader::new);
        if let Some(out) = &mut replies {
            let _ = out.read_line(&mut line);
        }
        if line.trim() != "ready" {
            let _ = child.kill();
            let mut err = String::new();
            if let Some(mut e) = child.stderr.take() {
                let _ = std::io::Read::read_to_string(&mut e, &mut err);
            }
            let _ = child.wait();
            return Err(ClusterError::Unavailable(format!(
                "cannot create a network namespace: {}",
                err.trim()
            )));
        }
        Ok(Self { child, replies })
    }
    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Send the holder one command and read its answer (`ok` or the error).
    fn ask(&mut self, command: &str) -> Result<(), HolderError> {
        use std::io::{BufRead, Write};
        let stdin = self
            .child
            .stdin
            .as_mut()
            .ok_or(HolderError::NoPipe("stdin"))?;
        writeln!(stdin, "{command}")?;
        let mut line = String::new();
        let out = self.replies.as_mut().ok_or(HolderError::NoPipe("stdout"))?;
        out.read_line(&mut line)?;
        match line.trim() {
            "ok" => Ok(()),
            "" => Err(HolderError::Exited),
            e => Err(HolderError::Refused(e.to_string())),
        }
    }
}

/// Why a holder did not carry out a command.
#[derive(Debug, thiserror::Error)]
pub enum HolderError {
    #[error("the holder has no {0}")]
    NoPipe(&'static str),
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error("the holder exited")]
    Exited,
    /// The holder's own answer (`error: …`).
    #[error("{0}")]
    Refused(String),
}

impl Drop for Holder {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The holder side (`ringlab __netns-holder [--shm SIZE]`): a fresh network namespace (and,
/// with `--shm`, a mount namespace with a tmpfs of SIZE over /dev/shm) kept alive until the
/// parent goes away. It answers `shm-size SIZE` (remount bigger: `docker run --shm-size`) and
/// `ipc-host` (unmount: the host's /dev/shm shows through, as with `--ipc=host`) on stdin.
pub fn holder_main(shm: Option<&str>, hostname: Option<&str>) -> std::process::ExitCode {
    use nix::sched::CloneFlags;
    let _ = nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL);
    let mut flags = CloneFlags::CLONE_NEWNET;
    if shm.is_some() {
        flags |= CloneFlags::CLONE_NEWNS;
    }
    if hostname.is_some() {
        flags |= CloneFlags::CLONE_NEWUTS;
    }
    if let Err(e) = nix::sched::unshare(flags) {
        eprintln!("unshare: {}", std::io::Error::from(e));
        return std::process::ExitCode::from(1);
    }
    // This process is alone in its new UTS namespace.
    if let Some(h) = hostname
        && let Err(e) = nix::unistd::sethostname(h)
    {
        eprintln!("sethostname {h}: {}", std::io::Error::from(e));
        return std::process::ExitCode::from(1);
    }
    if let Some(size) = shm
        && let Err(e) = private_dev_shm(size)
    {
        eprintln!("a private /dev/shm of {size}: {e}");
        return std::process::ExitCode::from(1);
    }
    println!("ready");
    // Until the launcher closes our stdin or dies.
    for line in std::io::BufRead::lines(std::io::stdin().lock()).map_while(Result::ok) {
        let mut words = line.split_whitespace();
        let r = match (words.next(), words.next()) {
            (Some("shm-size"), Some(size)) => mount_dev_shm(size, true),
            // This process is alone in its mount namespace.
            (Some("ipc-host"), None) => {
                nix::mount::umount2("/dev/shm", nix::mount::MntFlags::MNT_DETACH)
                    .map_err(|e| ShmError::Mount(e.into()))
            }
            _ => Err(ShmError::UnknownCommand(line.clone())),
        };
        match r {
            Ok(()) => println!("ok"),
            Err(e) => println!("error: {e}"),
        }
    }
    std::process::ExitCode::SUCCESS
}

/// Why the holder could not set up or change its /dev/shm.
#[derive(Debug, thiserror::Error)]
enum ShmError {
    #[error("making mounts private: {0}")]
    Private(std::io::Error),
    #[error("bad size `{0}`")]
    BadSize(String),
    #[error("{0}")]
    Mount(std::io::Error),
    #[error("unknown command `{0}`")]
    UnknownCommand(String),
}

/// Make mounts private to this namespace, then put a tmpfs of `size` over /dev/shm.
fn private_dev_shm(size: &str) -> Result<(), ShmError> {
    use nix::mount::MsFlags;
    // Changes only this process's (new) mount namespace.
    nix::mount::mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_REC | MsFlags::MS_PRIVATE,
        None::<&str>,
    )
    .map_err(|e| ShmError::Private(e.into()))?;
    mount_dev_shm(size, false)
}

/// Mount (or remount) the tmpfs over /dev/shm with `size` (tmpfs units: 64m, 1g).
fn mount_dev_shm(size: &str, remount: bool) -> Result<(), ShmError> {
    use nix::mount::MsFlags;
    if !size.chars().all(|c| c.is_ascii_alphanumeric()) {
        return Err(ShmError::BadSize(size.into()));
    }
    let opts = format!("size={size},mode=1777");
    let mut flags = MsFlags::MS_NOSUID | MsFlags::MS_NODEV;
    if remount {
        flags |= MsFlags::MS_REMOUNT;
    }
    nix::mount::mount(
        Some("tmpfs"),
        "/dev/shm",
        Some("tmpfs"),
        flags,
        Some(opts.as_str()),
    )
    .map_err(|e| ShmError::Mount(e.into()))
}

pub struct Cluster {
    pub nodes: Vec<Node>,
    /// The iproute2 commands that build the same cluster by hand, to show the learner.
    pub commands: Vec<String>,
    holders: Vec<Holder>,
    /// Some: the emulated cluster (processes on this host, virtual interface tables).
    vnet: Option<VNet>,
    /// Why the cluster is emulated, to say plainly.
    pub emulated_because: Option<String>,
    /// The emulated cluster's stand-ins for private /dev/shm mounts, per node.
    emu_shm: Vec<EmuShm>,
    /// The emulated cluster's shaped links, per node ([`Cluster::shape`]).
    shapes: Vec<Vec<Shape>>,
}

/// An emulated node's /dev/shm: a folder of its own with a byte budget the ranks' segment
/// allocation honours (`RINGLAB_SHM_DIR`, `RINGLAB_SHM_LIMIT`), removed with the cluster.
struct EmuShm {
    dir: std::path::PathBuf,
    /// None: no budget (the fix gave the node the host's /dev/shm or a big one).
    limit: Option<u64>,
}

impl Drop for EmuShm {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A change to a node's private /dev/shm: the fixes `docker run` offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShmChange<'a> {
    /// `--shm-size=SIZE`.
    Size(&'a str),
    /// `--ipc=host`: the host's /dev/shm.
    Host,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("nodes", &self.nodes)
            .finish()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error("`{cmd}` failed: {err}")]
    Command { cmd: String, err: String },
    #[error("network namespaces are not available here ({0}); run as root")]
    Unavailable(String),
    #[error("entering {ns}: {err}")]
    Setns { ns: String, err: String },
    #[error("user namespaces are not available here ({0})")]
    UserNs(std::io::Error),
    #[error("node {node}'s emulated /dev/shm: {err}")]
    EmuShm { node: usize, err: std::io::Error },
    #[error("`iptables --version` failed: {0}")]
    IptablesFailed(String),
    #[error(
        "the `iptables` command is not installed (or not on PATH); install it (Debian: apt-get install iptables)"
    )]
    IptablesMissing,
    #[error(
        "the `iptables` command could not run ({0}); install it (Debian: apt-get install iptables)"
    )]
    IptablesCannotRun(std::io::Error),
    /// Namespaces were asked for (`--mode netns`) and cannot be made.
    #[error("{0}, or pass --mode emulated")]
    NetnsAsked(Box<ClusterError>),
}

/// Run `ip ARGS`, inside the namespace at `ns` when given.
fn ip(ns: Option<&str>, args: &[String]) -> Result<(), ClusterError> {
    command(ns, "ip", args)
}

fn run_in(ns: &str, prog: &str, args: &[String]) -> Result<(), ClusterError> {
    command(Some(ns), prog, args)
}

fn command(ns: Option<&str>, prog: &str, args: &[String]) -> Result<(), ClusterError> {
    let cmd = format!("{prog} {}", args.join(" "));
    let mut c = Command::new(prog);
    c.args(args);
    let file = match ns {
        Some(path) => Some(File::open(path).map_err(|e| ClusterError::Setns {
            ns: path.into(),
            err: e.to_string(),
        })?),
        None => None,
    };
    // `file` stays open until the command has run.
    if let Some(f) = &file {
        crate::lab::fork::enter_namespaces(&mut c, vec![(f.as_raw_fd(), libc::CLONE_NEWNET)]);
    }
    let out = c.output().map_err(|e| ClusterError::Command {
        cmd: cmd.clone(),
        err: e.to_string(),
    })?;
    if !out.status.success() {
        return Err(ClusterError::Command {
            cmd,
            err: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(())
}

fn sv(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| s.to_string()).collect()
}

/// Can this process make network namespaces? (Root, or root inside a user namespace.)
pub fn available() -> Result<(), ClusterError> {
    Holder::spawn(None, None).map(|_| ())
}

/// Set in a command re-run inside its own user namespace (see [`rerun_in_user_namespace`]).
pub const USERNS_ENV: &str = "RINGLAB_USERNS";

/// What a cluster is made of: network namespaces of this kernel, or processes on this host
/// with virtual interfaces on loopback addresses. Its word (`netns`, `emulated`) is what the
/// JSON report carries.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    serde::Serialize,
    serde::Deserialize,
    strum::Display,
    strum::IntoStaticStr,
)]
#[serde(rename_all = "lowercase")]
#[strum(serialize_all = "lowercase")]
pub enum ClusterMode {
    Netns,
    Emulated,
}

/// Is this process the re-run inside a user namespace?
pub fn in_user_namespace() -> bool {
    std::env::var_os(USERNS_ENV).is_some()
}

/// Run this same command again inside a new user namespace (where this user is root) with a
/// network namespace of its own: there an unprivileged user may make the lab's namespaces,
/// veth links, bridges and iptables rules. The re-run dies with this process. Returns its exit
/// status, or why the kernel refused (then the caller emulates).
pub fn rerun_in_user_namespace() -> Result<std::process::ExitStatus, ClusterError> {
    let exe = crate::lab::self_exe().map_err(ClusterError::UserNs)?;
    let (uid, gid) = (nix::unistd::getuid(), nix::unistd::getgid());
    let mut cmd = Command::new(exe);
    cmd.args(std::env::args_os().skip(1)).env(USERNS_ENV, "1");
    // The re-run dies with this process.
    crate::lab::fork::die_with_parent(&mut cmd);
    crate::lab::fork::user_and_net_namespace(&mut cmd, uid, gid)
        .map_err(|e| ClusterError::UserNs(e.into()))?;
    cmd.status().map_err(ClusterError::UserNs)
}

impl Cluster {
    /// Build K nodes; `fabric_names[i]` names node i's fabric NIC (default eth0).
    pub fn create(k: usize, fabric_names: &[String]) -> Result<Self, ClusterError> {
        Self::create_with_shm(k, fabric_names, None)
    }

    /// [`Cluster::create`], each node a container with a /dev/shm of `shm` (like `docker run`
    /// without --ipc=host: 64m unless --shm-size) where given.
    pub fn create_with_shm(
        k: usize,
        fabric_names: &[String],
        shm: Option<&str>,
    ) -> Result<Self, ClusterError> {
        let mut c = Cluster {
            nodes: Vec::new(),
            commands: Vec::new(),
            holders: Vec::new(),
            vnet: None,
            emulated_because: None,
            emu_shm: Vec::new(),
            shapes: vec![Vec::new(); k],
        };
        let sw = Holder::spawn(None, None)?;
        let sw_ns = format!("/proc/{}/ns/net", sw.pid());
        let sw_pid = sw.pid().to_string();
        c.holders.push(sw);
        c.commands.push(format!("ip netns add {PREFIX}sw"));
        ip(Some(&sw_ns), &sv(&["link", "add", "br0", "type", "bridge"]))?;
        ip(Some(&sw_ns), &sv(&["link", "set", "br0", "up"]))?;
        c.commands.push(format!(
            "ip -n {PREFIX}sw link add br0 type bridge && ip -n {PREFIX}sw link set br0 up"
        ));
        for i in 0..k {
            let hostname = node_hostname(i);
            let h = Holder::spawn(shm, Some(&hostname))?;
            let ns = format!("/proc/{}/ns/net", h.pid());
            let mntns = shm.map(|_| format!("/proc/{}/ns/mnt", h.pid()));
            let utsns = Some(format!("/proc/{}/ns/uts", h.pid()));
            let pid = h.pid().to_string();
            c.holders.push(h);
            let name = format!("{PREFIX}n{i}");
            let fabric = fabric_names
                .get(i)
                .cloned()
                .unwrap_or_else(|| "eth0".into());
            let addr = Ipv4Addr::new(10, 77, 0, i as u8 + 1);
            let port = format!("n{i}");
            ip(Some(&ns), &sv(&["link", "set", "lo", "up"]))?;
            ip(
                None,
                &sv(&[
                    "link", "add", &fabric, "netns", &pid, "type", "veth", "peer", "name", &port,
                    "netns", &sw_pid,
                ]),
            )?;
            ip(Some(&sw_ns), &sv(&["link", "set", &port, "master", "br0"]))?;
            ip(Some(&sw_ns), &sv(&["link", "set", &port, "up"]))?;
            ip(
                Some(&ns),
                &sv(&["addr", "add", &format!("{addr}/24"), "dev", &fabric]),
            )?;
            ip(Some(&ns), &sv(&["link", "set", &fabric, "up"]))?;
            // The trap: a docker0 bridge with the same address on every node, as Docker makes.
            ip(
                Some(&ns),
                &sv(&["link", "add", "docker0", "type", "bridge"]),
            )?;
            ip(
                Some(&ns),
                &sv(&["addr", "add", "172.17.0.1/16", "dev", "docker0"]),
            )?;
            ip(Some(&ns), &sv(&["link", "set", "docker0", "up"]))?;
            c.commands.extend([
                format!("ip netns add {name}"),
                format!("ip -n {name} link set lo up"),
                format!("ip link add {fabric} netns {name} type veth peer name {port} netns {PREFIX}sw"),
                format!("ip -n {PREFIX}sw link set {port} master br0 && ip -n {PREFIX}sw link set {port} up"),
                format!("ip -n {name} addr add {addr}/24 dev {fabric} && ip -n {name} link set {fabric} up"),
                format!("ip -n {name} link add docker0 type bridge"),
                format!("ip -n {name} addr add 172.17.0.1/16 dev docker0 && ip -n {name} link set docker0 up"),
            ]);
            if let Some(size) = shm {
                c.commands.push(format!(
                    "unshare --mount --propagation private sh -c 'mount -t tmpfs -o size={size},mode=1777 tmpfs /dev/shm; ...'   # node {i}: a container's /dev/shm (docker run without --shm-size: 64m)"
                ));
            }
            c.commands.push(format!(
                "unshare --uts sh -c 'hostname {hostname}; ...'   # node {i}: a host name of its own"
            ));
            wait_running(&ns, &fabric)?;
            c.nodes.push(Node {
                index: i,
                netns: Some(ns),
                fabric,
                ip: addr,
                mntns,
                utsns,
                hostname,
            });
        }
        Ok(c)
    }

    /// The emulated cluster: K nodes as processes on this host, each with a virtual interface
    /// table on loopback addresses (see [`crate::comm::emu::vnet`]). `why` says why it is emulated.
    pub fn emulated(k: usize, fabric_names: &[String], why: &str) -> Result<Self, ClusterError> {
        Self::emulated_with_shm(k, fabric_names, why, None)
    }

    /// [`Cluster::emulated`], each node with a /dev/shm budget of `shm` where given: a fresh
    /// private folder per node in the temporary folder ([`crate::private::fresh_dir`]), so
    /// nobody else can read the ranks' segments, swap them or hold the budget's lock. Fails
    /// (naming the folder) where such a folder cannot be made: a node without its budget would
    /// quietly stage no trap.
    pub fn emulated_with_shm(
        k: usize,
        fabric_names: &[String],
        why: &str,
        shm: Option<&str>,
    ) -> Result<Self, ClusterError> {
        let net = VNet::build(k, fabric_names);
        let nodes = (0..k)
            .map(|i| Node {
                index: i,
                netns: None,
                fabric: fabric_names
                    .get(i)
                    .cloned()
                    .unwrap_or_else(|| "eth0".into()),
                ip: vnet::fabric_ip(i),
                mntns: None,
                utsns: None,
                hostname: node_hostname(i),
            })
            .collect();
        let limit = shm.and_then(|s| crate::units::parse_size(s).ok());
        let mut emu_shm: Vec<EmuShm> = Vec::new();
        if let Some(limit) = limit {
            for i in 0..k {
                let dir =
                    crate::private::fresh_dir(&std::env::temp_dir(), &format!("{PREFIX}shm-n{i}-"))
                        .map_err(|err| ClusterError::EmuShm { node: i, err })?;
                emu_shm.push(EmuShm {
                    dir,
                    limit: Some(limit),
                });
            }
        }
        let mut commands = vec![format!(
            "# EMULATED cluster ({why}): no namespaces; each node's interfaces are loopback addresses"
        )];
        commands.extend(net.describe());
        if let Some(size) = shm {
            commands.push(format!(
                "# each node's /dev/shm: a folder of its own with a {size} budget (a real tmpfs needs a mount namespace)"
            ));
        }
        Ok(Self {
            nodes,
            commands,
            holders: Vec::new(),
            vnet: Some(net),
            emulated_because: Some(why.to_string()),
            emu_shm,
            shapes: vec![Vec::new(); k],
        })
    }

    /// Network namespaces, or the emulated cluster.
    pub fn mode(&self) -> ClusterMode {
        if self.vnet.is_some() {
            ClusterMode::Emulated
        } else {
            ClusterMode::Netns
        }
    }

    pub fn netns_path(&self, node: usize) -> Option<String> {
        self.nodes.get(node).and_then(|n| n.netns.clone())
    }

    /// Extra environment a rank on `node` needs (its virtual view, when emulated).
    pub fn node_env(&self, node: usize) -> Vec<(String, String)> {
        let mut env: Vec<(String, String)> = self
            .vnet
            .as_ref()
            .map(|v| vec![v.env_for(node)])
            .unwrap_or_default();
        // The emulated nodes share this host: each rank carries its node's name instead.
        if self.vnet.is_some()
            && let Some(n) = self.nodes.get(node)
        {
            env.push((
                crate::comm::emu::log::HOSTNAME_ENV.into(),
                n.hostname.clone(),
            ));
        }
        if let Some(shapes) = self.shapes.get(node).filter(|s| !s.is_empty()) {
            env.push((
                crate::comm::cpu::pace::SHAPE_ENV.into(),
                crate::comm::cpu::pace::shapes_env(shapes),
            ));
        }
        if let Some(e) = self.emu_shm.get(node) {
            env.push((
                crate::comm::cpu::shm::DIR_ENV.into(),
                e.dir.display().to_string(),
            ));
            if let Some(limit) = e.limit {
                env.push((crate::comm::cpu::shm::LIMIT_ENV.into(), limit.to_string()));
            }
        }
        env
    }

    /// The UTS namespace of `node` (its own host name), where it has one.
    pub fn utsns_path(&self, node: usize) -> Option<String> {
        self.nodes.get(node).and_then(|n| n.utsns.clone())
    }

    /// The mount namespace of `node` (a /dev/shm of its own), if it has one.
    pub fn mntns_path(&self, node: usize) -> Option<String> {
        self.nodes.get(node).and_then(|n| n.mntns.clone())
    }

    /// Apply a `docker run` fix to node `node`'s private /dev/shm (nothing to do on a node
    /// that uses the host's).
    pub fn change_shm(&mut self, node: usize, change: ShmChange) -> Result<(), ClusterError> {
        if let Some(e) = self.emu_shm.get_mut(node) {
            e.limit = match change {
                ShmChange::Size(s) => crate::units::parse_size(s).ok(),
                ShmChange::Host => None,
            };
            return Ok(());
        }
        if self.mntns_path(node).is_none() {
            return Ok(());
        }
        let command = match change {
            ShmChange::Size(s) => format!("shm-size {s}"),
            ShmChange::Host => "ipc-host".into(),
        };
        let holder = self
            .holders
            .get_mut(node + 1)
            .ok_or_else(|| ClusterError::Unavailable(format!("no holder for node {node}")))?;
        holder.ask(&command).map_err(|e| {
            ClusterError::Unavailable(format!("node {node}'s /dev/shm ({command}): {e}"))
        })?;
        self.note(match change {
            ShmChange::Size(s) => {
                format!(
                    "mount -o remount,size={s} /dev/shm   # node {node}: docker run --shm-size={s}"
                )
            }
            ShmChange::Host => {
                format!(
                    "umount /dev/shm   # node {node}: docker run --ipc=host (the host's /dev/shm)"
                )
            }
        });
        Ok(())
    }

    /// The address to bind on this host for node 0's fabric address `ip` (the store).
    pub fn bind_ip(&self, ip: IpAddr) -> IpAddr {
        self.vnet
            .as_ref()
            .and_then(|v| v.real_ip(0, ip))
            .unwrap_or(ip)
    }

    /// The address to bind on this host for node `node`'s address `ip`.
    pub fn bind_ip_on(&self, node: usize, ip: IpAddr) -> IpAddr {
        self.vnet
            .as_ref()
            .and_then(|v| v.real_ip(node, ip))
            .unwrap_or(ip)
    }

    /// A node's interface table, as NCCL would see it there.
    pub fn interfaces(&self, node: usize) -> Vec<Iface> {
        match (&self.vnet, self.netns_path(node)) {
            (Some(v), _) => v.ifaces(node),
            (None, Some(path)) => interfaces(&path).unwrap_or_default(),
            (None, None) => Vec::new(),
        }
    }

    /// Can a TCP connection from `node` reach `addr`? "ok" or the errno, NCCL-style.
    pub fn probe(&self, node: usize, addr: std::net::SocketAddr) -> Reached {
        let timeout = std::time::Duration::from_millis(1500);
        match (&self.vnet, self.netns_path(node)) {
            (Some(v), _) => match v.connect(node, addr, timeout) {
                Ok(_) => Reached::Ok,
                Err(e) => Reached::from_io(&e),
            },
            (None, Some(path)) => probe(&path, addr),
            (None, None) => Reached::NoSuchNode,
        }
    }

    /// A firewall on `node` that silently drops new TCP connections from other nodes except to
    /// `port` (it replaces what was there). Real iptables rules in the node's namespace; in the
    /// emulated cluster the virtual router drops them.
    pub fn firewall(&mut self, node: usize, port: u16) -> Result<(), ClusterError> {
        if let Some(v) = &mut self.vnet {
            if let Some(n) = v.nodes.get_mut(node) {
                n.drop_except = Some(port);
            }
            return Ok(());
        }
        let path = self.node_path(node)?;
        let name = format!("{PREFIX}n{node}");
        run_in(&path, "iptables", &sv(&["-F", "INPUT"]))?;
        {
            let p = port.to_string();
            let rules: [Vec<String>; 4] = [
                sv(&["-A", "INPUT", "-i", "lo", "-j", "ACCEPT"]),
                sv(&["-A", "INPUT", "-p", "tcp", "--dport", &p, "-j", "ACCEPT"]),
                sv(&[
                    "-A",
                    "INPUT",
                    "-m",
                    "conntrack",
                    "--ctstate",
                    "ESTABLISHED,RELATED",
                    "-j",
                    "ACCEPT",
                ]),
                sv(&["-A", "INPUT", "-p", "tcp", "--syn", "-j", "DROP"]),
            ];
            for r in rules {
                run_in(&path, "iptables", &r)?;
                self.note(format!("ip netns exec {name} iptables {}", r.join(" ")));
            }
        }
        Ok(())
    }

    /// The fix for [`Cluster::firewall`]: accept everything from the fabric subnet, first.
    pub fn open_fabric(&mut self, node: usize) -> Result<(), ClusterError> {
        if let Some(v) = &mut self.vnet {
            if let Some(n) = v.nodes.get_mut(node) {
                n.drop_except = None;
            }
            return Ok(());
        }
        let path = self.node_path(node)?;
        let rule = sv(&["-I", "INPUT", "-s", "10.77.0.0/24", "-j", "ACCEPT"]);
        run_in(&path, "iptables", &rule)?;
        self.note(format!(
            "ip netns exec {PREFIX}n{node} iptables {}",
            rule.join(" ")
        ));
        Ok(())
    }

    /// Give every node a second NIC, `name`, on its own subnet 10.78.0.0/24 and its own switch
    /// (a data network beside the management one), after the nodes' other interfaces: NCCL's
    /// rules, unset, take the first, so this one only by name.
    pub fn add_nic(&mut self, name: &str) -> Result<(), ClusterError> {
        if let Some(v) = &mut self.vnet {
            v.add_nic(name);
            return Ok(());
        }
        let sw =
            self.holders.first().map(|h| h.pid()).ok_or_else(|| {
                ClusterError::Unavailable("the switch's namespace is gone".into())
            })?;
        let sw_ns = format!("/proc/{sw}/ns/net");
        ip(Some(&sw_ns), &sv(&["link", "add", "br1", "type", "bridge"]))?;
        ip(Some(&sw_ns), &sv(&["link", "set", "br1", "up"]))?;
        self.note(format!(
            "ip -n {PREFIX}sw link add br1 type bridge && ip -n {PREFIX}sw link set br1 up"
        ));
        for i in 0..self.nodes.len() {
            let path = self.node_path(i)?;
            let pid = self
                .holders
                .get(i + 1)
                .map(|h| h.pid().to_string())
                .unwrap_or_default();
            let (port, addr) = (format!("m{i}"), vnet::data_ip(i));
            let (sw_pid, node) = (sw.to_string(), format!("{PREFIX}n{i}"));
            ip(
                None,
                &sv(&[
                    "link", "add", name, "netns", &pid, "type", "veth", "peer", "name", &port,
                    "netns", &sw_pid,
                ]),
            )?;
            ip(Some(&sw_ns), &sv(&["link", "set", &port, "master", "br1"]))?;
            ip(Some(&sw_ns), &sv(&["link", "set", &port, "up"]))?;
            ip(
                Some(&path),
                &sv(&["addr", "add", &format!("{addr}/24"), "dev", name]),
            )?;
            ip(Some(&path), &sv(&["link", "set", name, "up"]))?;
            wait_running(&path, name)?;
            self.note(format!(
                "ip link add {name} netns {node} type veth peer name {port} netns {PREFIX}sw"
            ));
            self.note(format!(
                "ip -n {PREFIX}sw link set {port} master br1 && ip -n {PREFIX}sw link set {port} up"
            ));
            self.note(format!(
                "ip -n {node} addr add {addr}/24 dev {name} && ip -n {node} link set {name} up"
            ));
        }
        Ok(())
    }

    /// Shape `node`'s sends through `iface` to `rate`: tc's token bucket on the interface in
    /// the node's namespace (`tc qdisc replace dev IFACE root tbf rate R burst 64kb latency
    /// 50ms`), or the emulated ranks' pacer ([`crate::comm::cpu::pace`]). The qdisc lives in the
    /// node's namespace and goes with it.
    pub fn shape(&mut self, node: usize, iface: &str, rate: Rate) -> Result<(), ClusterError> {
        let shape = Shape {
            iface: iface.to_string(),
            rate,
        };
        if self.vnet.is_some() {
            let shapes = self
                .shapes
                .get_mut(node)
                .ok_or_else(|| ClusterError::Setns {
                    ns: format!("node {node}"),
                    err: "no such node".into(),
                })?;
            shapes.retain(|s| s.iface != iface);
            shapes.push(shape);
            return Ok(());
        }
        let path = self.node_path(node)?;
        let args = sv(&[
            "qdisc",
            "replace",
            "dev",
            iface,
            "root",
            "tbf",
            "rate",
            &rate.to_string(),
            "burst",
            crate::comm::cpu::pace::TBF_BURST,
            "latency",
            crate::comm::cpu::pace::TBF_LATENCY,
        ]);
        run_in(&path, "tc", &args).map_err(tc_missing)?;
        self.note(format!(
            "ip netns exec {PREFIX}n{node} tc {}",
            args.join(" ")
        ));
        Ok(())
    }

    /// Undo [`Cluster::shape`]: the link back at full speed (a new cable, a reseated optic).
    pub fn unshape(&mut self, node: usize, iface: &str) -> Result<(), ClusterError> {
        if self.vnet.is_some() {
            if let Some(shapes) = self.shapes.get_mut(node) {
                shapes.retain(|s| s.iface != iface);
            }
            return Ok(());
        }
        let path = self.node_path(node)?;
        let args = sv(&["qdisc", "del", "dev", iface, "root"]);
        match run_in(&path, "tc", &args) {
            // Nothing shaped there: nothing to undo.
            Err(ClusterError::Command { err, .. })
                if err.contains("No such file")
                    || err.contains("Cannot delete qdisc with handle of zero") => {}
            r => r.map_err(tc_missing)?,
        }
        self.note(format!(
            "ip netns exec {PREFIX}n{node} tc {}",
            args.join(" ")
        ));
        Ok(())
    }

    /// What shapes each node's links, as `tc qdisc show` would list it (the emulated cluster's
    /// pacers in the same words): one line per shaped interface.
    pub fn qdiscs(&self, node: usize) -> Vec<String> {
        if self.vnet.is_some() {
            return self
                .shapes
                .get(node)
                .into_iter()
                .flatten()
                .map(|s| {
                    format!(
                        "qdisc tbf dev {} root rate {} burst {} lat {} (emulated: the ranks pace their sends)",
                        s.iface,
                        s.rate,
                        crate::comm::cpu::pace::TBF_BURST,
                        crate::comm::cpu::pace::TBF_LATENCY
                    )
                })
                .collect();
        }
        let Some(path) = self.netns_path(node) else {
            return Vec::new();
        };
        let mut c = Command::new("tc");
        c.args(["qdisc", "show"]);
        let Ok(f) = File::open(&path) else {
            return Vec::new();
        };
        crate::lab::fork::enter_namespaces(&mut c, vec![(f.as_raw_fd(), libc::CLONE_NEWNET)]);
        c.output()
            .map(|o| {
                String::from_utf8_lossy(&o.stdout)
                    .lines()
                    .filter(|l| l.contains("tbf"))
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Show a command once, however often a re-run repeats it.
    fn note(&mut self, cmd: String) {
        if !self.commands.contains(&cmd) {
            self.commands.push(cmd);
        }
    }

    fn node_path(&self, node: usize) -> Result<String, ClusterError> {
        self.netns_path(node).ok_or_else(|| ClusterError::Setns {
            ns: format!("node {node}"),
            err: "no such node".into(),
        })
    }
}

/// Wait until `iface` in the namespace at `path` is running (IFF_RUNNING: up with a carrier).
/// A veth's carrier reaches its operational state through the kernel's link watch, which may
/// defer it by up to a second; NCCL from 2.28 (and the ranks imitating it) skip an interface
/// that is not running yet, and would pick another. Gives up after 5 s, saying so.
fn wait_running(path: &str, iface: &str) -> Result<(), ClusterError> {
    let running = libc::IFF_RUNNING as u32;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let mut pause = std::time::Duration::from_millis(1);
    loop {
        let raw = in_netns(path, ifaces::host_raw)?.unwrap_or_default();
        if raw
            .iter()
            .any(|r| r.name == iface && r.flags & running != 0)
        {
            return Ok(());
        }
        if std::time::Instant::now() > deadline {
            return Err(ClusterError::Command {
                cmd: format!("ip link set {iface} up"),
                err: format!("{iface} has no carrier after 5 s"),
            });
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(std::time::Duration::from_millis(50));
    }
}

/// `tc` that could not run is a missing package, said with the package to install.
fn tc_missing(e: ClusterError) -> ClusterError {
    match e {
        ClusterError::Command { cmd, err } if err.contains("No such file or directory (os error 2)") => {
            ClusterError::Command {
                cmd,
                err: "the `tc` command is not installed; install it (Debian: apt-get install iproute2)".into(),
            }
        }
        other => other,
    }
}

/// Is a packet filter usable in namespaces here (the `iptables` command)?
pub fn firewall_available() -> Result<(), ClusterError> {
    match Command::new("iptables").arg("--version").output() {
        Ok(o) if o.status.success() => Ok(()),
        Ok(o) => Err(ClusterError::IptablesFailed(
            String::from_utf8_lossy(&o.stderr).trim().to_string(),
        )),
        // A PATH search that met a directory this user may not read says "permission denied".
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::PermissionDenied
            ) =>
        {
            Err(ClusterError::IptablesMissing)
        }
        Err(e) => Err(ClusterError::IptablesCannotRun(e)),
    }
}

/// Remove what an older ringlab may have left: named `rlab-*` namespaces and stray holders.
pub fn cleanup_all() -> Vec<String> {
    let mut removed = Vec::new();
    if let Ok(out) = Command::new("ip").args(["netns", "list"]).output() {
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let name = line.split_whitespace().next().unwrap_or("");
            if name.starts_with(PREFIX) && ip(None, &sv(&["netns", "del", name])).is_ok() {
                removed.push(format!("netns {name}"));
            }
        }
    }
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for e in dir.flatten() {
            let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
                continue;
            };
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            // Only orphans: a holder whose launcher is alive still belongs to a running lab.
            let ppid = std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|st| {
                    st.rsplit(')')
                        .next()
                        .and_then(|rest| rest.split_whitespace().nth(1))
                        .and_then(|p| p.parse::<i32>().ok())
                });
            if ppid == Some(1) && cmdline.split(|&b| b == 0).any(|a| a == b"__netns-holder") {
                // The pid was read from /proc a moment ago: should that holder have exited and
                // its pid been reused in between, the signal would reach another process. The
                // window is small (an orphaned holder only exits when killed), and the cmdline
                // check narrows it to processes that are holders.
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
                removed.push(format!("holder process {pid}"));
            }
        }
    }
    removed
}

/// Run `f` on a fresh thread that has entered `netns` (sockets it makes live there).
pub fn in_netns<T: Send + 'static>(
    netns_path: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, ClusterError> {
    let path = netns_path.to_string();
    std::thread::spawn(move || -> Result<T, ClusterError> {
        enter(&path)?;
        Ok(f())
    })
    .join()
    .map_err(|_| ClusterError::Setns {
        ns: netns_path.into(),
        err: "thread panicked".into(),
    })?
}

/// setns(2) the calling thread into a network namespace.
pub fn enter(netns_path: &str) -> Result<(), ClusterError> {
    let f = File::open(netns_path).map_err(|e| ClusterError::Setns {
        ns: netns_path.into(),
        err: e.to_string(),
    })?;
    // setns affects only the calling thread.
    nix::sched::setns(&f, nix::sched::CloneFlags::CLONE_NEWNET).map_err(|e| ClusterError::Setns {
        ns: netns_path.into(),
        err: std::io::Error::from(e).to_string(),
    })
}

/// A node's interface table, as NCCL would see it.
pub fn interfaces(netns_path: &str) -> Result<Vec<Iface>, ClusterError> {
    in_netns(netns_path, ifaces::list)?.map_err(|e| ClusterError::Setns {
        ns: netns_path.into(),
        err: e.to_string(),
    })
}

/// Can a TCP connection from inside `netns_path` reach `addr`? "ok" or the errno, NCCL-style.
pub fn probe(netns_path: &str, addr: std::net::SocketAddr) -> Reached {
    in_netns(
        netns_path,
        move || match std::net::TcpStream::connect_timeout(
            &addr,
            std::time::Duration::from_millis(1500),
        ) {
            Ok(_) => Reached::Ok,
            Err(e) => Reached::from_io(&e),
        },
    )
    .unwrap_or_else(|e| Reached::Other(e.to_string()))
}

pub fn is_fabric(ip: &IpAddr) -> bool {
    matches!(ip, IpAddr::V4(v) if v.octets()[..3] == [10, 77, 0])
}
