//! The emulated cluster, for machines where network namespaces cannot be made (no root and no
//! unprivileged user namespaces). Every node of the hang lab is then a set of processes on this
//! host, and each node sees a virtual interface table whose addresses are mapped onto distinct
//! loopback addresses (Linux routes all of 127.0.0.0/8 to `lo`, so any of them can be bound):
//!
//! ```text
//!   node i sees           bound on this host     reachable from
//!   lo      127.0.0.1     127.100.i.1            node i only
//!   eth0    10.77.0.(i+1) 127.77.0.(i+1)         every node (the fabric)
//!   docker0 172.17.0.1    127.17.i.1             node i only: a peer that dials it lands on itself
//! ```
//!
//! A rank learns its node's table from `RINGLAB_VNET` (JSON); [`crate::comm::cpu::ifaces::list`]
//! returns that table, the listener binds the mapped address and advertises the virtual one,
//! and every connect is routed the way node i's kernel would route it: its own addresses
//! locally, the fabric to the owning node, an unused fabric address is "No route to host"
//! (ARP gets no answer) and anything else "Network is unreachable". A node may also drop new
//! connections from other nodes except to one port, the way a firewall rule would; the dialer
//! then waits out its timeout and sees "Connection timed out".

use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream};
use std::sync::OnceLock;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::comm::cpu::ifaces::Iface;

/// The variable that carries a rank's view of the emulated cluster.
pub const ENV: &str = "RINGLAB_VNET";

/// The fabric subnet, 10.77.0.0/24, the same as the namespace cluster's.
pub const FABRIC: [u8; 3] = [10, 77, 0];

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VIface {
    pub name: String,
    /// The address the node sees and advertises.
    pub addr: IpAddr,
    /// The loopback address it is bound to on this host.
    pub real: IpAddr,
    /// Reachable from the other nodes (the fabric NIC) or only from this node.
    pub shared: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VNode {
    pub ifaces: Vec<VIface>,
    /// A firewall: new connections from other nodes are dropped unless they go to this port.
    #[serde(default)]
    pub drop_except: Option<u16>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VNet {
    pub nodes: Vec<VNode>,
}

/// One node's view: the network and which node this process is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct View {
    pub node: usize,
    pub net: VNet,
}

/// Where a connect from some node to a virtual address goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route {
    pub real: SocketAddr,
    /// A firewall on the way drops the SYN: the connect times out.
    pub dropped: bool,
}

impl VNet {
    /// K nodes; `fabric[i]` names node i's fabric NIC (default eth0).
    pub fn build(k: usize, fabric: &[String]) -> Self {
        let nodes = (0..k)
            .map(|i| {
                let n = i as u8;
                VNode {
                    ifaces: vec![
                        VIface {
                            name: "lo".into(),
                            addr: IpAddr::V4(Ipv4Addr::LOCALHOST),
                            real: IpAddr::V4(Ipv4Addr::new(127, 100, n, 1)),
                            shared: false,
                        },
                        VIface {
                            name: fabric.get(i).cloned().unwrap_or_else(|| "eth0".into()),
                            addr: IpAddr::V4(fabric_ip(i)),
                            real: IpAddr::V4(Ipv4Addr::new(127, 77, 0, n + 1)),
                            shared: true,
                        },
                        VIface {
                            name: "docker0".into(),
                            addr: IpAddr::V4(Ipv4Addr::new(172, 17, 0, 1)),
                            real: IpAddr::V4(Ipv4Addr::new(127, 17, n, 1)),
                            shared: false,
                        },
                    ],
                    drop_except: None,
                }
            })
            .collect();
        Self { nodes }
    }

    /// Give every node a second NIC, `name`, on the data subnet 10.78.0.0/24 (see
    /// [`data_ip`]), after its other interfaces; bound on 127.78.0.(i+1).
    pub fn add_nic(&mut self, name: &str) {
        for (i, n) in self.nodes.iter_mut().enumerate() {
            n.ifaces.push(VIface {
                name: name.to_string(),
                addr: IpAddr::V4(data_ip(i)),
                real: IpAddr::V4(Ipv4Addr::new(127, 78, 0, i as u8 + 1)),
                shared: true,
            });
        }
    }

    /// Node `node`'s interface table, as its ranks see it.
    pub fn ifaces(&self, node: usize) -> Vec<Iface> {
        self.nodes
            .get(node)
            .map(|n| {
                n.ifaces
                    .iter()
                    .map(|i| Iface {
                        name: i.name.clone(),
                        addr: i.addr,
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Route a connect from `from` to the virtual address `dst`, as node `from`'s kernel would.
    pub fn route(&self, from: usize, dst: SocketAddr) -> io::Result<Route> {
        let ip = dst.ip();
        if let Some(i) = self
            .nodes
            .get(from)
            .and_then(|n| n.ifaces.iter().find(|i| i.addr == ip))
        {
            return Ok(Route {
                real: SocketAddr::new(i.real, dst.port()),
                dropped: false,
            });
        }
        for n in &self.nodes {
            if let Some(i) = n.ifaces.iter().find(|i| i.shared && i.addr == ip) {
                return Ok(Route {
                    real: SocketAddr::new(i.real, dst.port()),
                    dropped: n.drop_except.is_some_and(|p| p != dst.port()),
                });
            }
        }
        match ip {
            IpAddr::V4(v) if v.octets()[..3] == FABRIC => Err(io::Error::new(
                io::ErrorKind::HostUnreachable,
                "No route to host",
            )),
            _ => Err(io::Error::new(
                io::ErrorKind::NetworkUnreachable,
                "Network is unreachable",
            )),
        }
    }

    /// Connect from node `from` to the virtual address `dst`.
    pub fn connect(
        &self,
        from: usize,
        dst: SocketAddr,
        timeout: Duration,
    ) -> io::Result<TcpStream> {
        let r = self.route(from, dst)?;
        if r.dropped {
            // The SYN vanishes: nothing answers until the dialer gives up.
            std::thread::sleep(timeout);
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "Connection timed out",
            ));
        }
        TcpStream::connect_timeout(&r.real, timeout)
    }

    /// The loopback address behind node `node`'s virtual address `ip` (to bind a listener).
    pub fn real_ip(&self, node: usize, ip: IpAddr) -> Option<IpAddr> {
        self.nodes
            .get(node)?
            .ifaces
            .iter()
            .find(|i| i.addr == ip)
            .map(|i| i.real)
    }

    /// The virtual address node `node` shows for a real (bound) one.
    pub fn virtual_of(&self, node: usize, real: SocketAddr) -> SocketAddr {
        self.nodes
            .get(node)
            .and_then(|n| n.ifaces.iter().find(|i| i.real == real.ip()))
            .map_or(real, |i| SocketAddr::new(i.addr, real.port()))
    }

    /// The mapping in words, one line per interface, for the learner.
    pub fn describe(&self) -> Vec<String> {
        let mut out = Vec::new();
        for (k, n) in self.nodes.iter().enumerate() {
            for i in &n.ifaces {
                out.push(format!(
                    "node {k}: {} {} is {} on this host's loopback ({})",
                    i.name,
                    i.addr,
                    i.real,
                    if i.shared {
                        "every node reaches it".to_string()
                    } else {
                        format!("only node {k} reaches it")
                    }
                ));
            }
            if let Some(p) = n.drop_except {
                out.push(format!(
                    "node {k}: firewall drops new connections from other nodes except to port {p}"
                ));
            }
        }
        out
    }

    /// The environment that puts a rank on node `node`.
    pub fn env_for(&self, node: usize) -> (String, String) {
        let view = View {
            node,
            net: self.clone(),
        };
        (
            ENV.to_string(),
            serde_json::to_string(&view).unwrap_or_default(),
        )
    }
}

/// Node i's fabric address.
/// Node i's address on the second (data) network, 10.78.0.(i+1).
pub fn data_ip(i: usize) -> Ipv4Addr {
    Ipv4Addr::new(10, 78, 0, i as u8 + 1)
}

pub fn fabric_ip(i: usize) -> Ipv4Addr {
    Ipv4Addr::new(FABRIC[0], FABRIC[1], FABRIC[2], i as u8 + 1)
}

/// This process's view, when it runs on an emulated node. A malformed `RINGLAB_VNET` is
/// reported once on stderr and ignored (the rank then sees the host's real interfaces).
pub fn current() -> Option<&'static View> {
    static VIEW: OnceLock<Option<View>> = OnceLock::new();
    VIEW.get_or_init(|| {
        let text = std::env::var(ENV).ok()?;
        match serde_json::from_str::<View>(&text) {
            Ok(v) => Some(v),
            Err(e) => {
                eprintln!("ringlab: ignoring {ENV}: {e}");
                None
            }
        }
    })
    .as_ref()
}

/// Connect the way this process's node would (plain TCP when not emulated).
pub fn connect_timeout(dst: SocketAddr, timeout: Duration) -> io::Result<TcpStream> {
    match current() {
        Some(v) => v.net.connect(v.node, dst, timeout),
        None => TcpStream::connect_timeout(&dst, timeout),
    }
}

/// The address to bind for a chosen interface address.
pub fn bind_ip(ip: IpAddr) -> IpAddr {
    current()
        .and_then(|v| v.net.real_ip(v.node, ip))
        .unwrap_or(ip)
}

/// The address to advertise for a bound listener.
pub fn advertised(bound: SocketAddr) -> SocketAddr {
    current().map_or(bound, |v| v.net.virtual_of(v.node, bound))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    fn sa(s: &str) -> SocketAddr {
        s.parse().expect("addr")
    }

    #[test]
    fn docker0_dialed_from_a_peer_lands_on_the_peer_itself() {
        let net = VNet::build(2, &[]);
        let from0 = net.route(0, sa("172.17.0.1:5000")).expect("route");
        let from1 = net.route(1, sa("172.17.0.1:5000")).expect("route");
        assert_ne!(from0.real, from1.real, "each node has its own docker0");
        assert_eq!(
            Some(from1.real.ip()),
            net.real_ip(1, "172.17.0.1".parse().expect("ip"))
        );
        assert_eq!(
            net.route(1, sa("10.77.0.1:5000")).expect("fabric").real,
            sa("127.77.0.1:5000")
        );
        // lo is per node too.
        assert_ne!(
            net.route(0, sa("127.0.0.1:1")).expect("lo").real,
            net.route(1, sa("127.0.0.1:1")).expect("lo").real
        );
    }

    #[test]
    fn unknown_addresses_fail_like_a_kernel() {
        let net = VNet::build(2, &[]);
        let e = net
            .route(1, sa("10.77.0.99:29500"))
            .expect_err("no such host");
        assert_eq!(e.kind(), io::ErrorKind::HostUnreachable);
        let e = net.route(1, sa("192.168.5.5:1")).expect_err("no route");
        assert_eq!(e.kind(), io::ErrorKind::NetworkUnreachable);
    }

    #[test]
    fn a_firewall_drops_all_but_its_port_and_only_from_other_nodes() {
        let mut net = VNet::build(2, &[]);
        net.nodes[0].drop_except = Some(29500);
        assert!(!net.route(1, sa("10.77.0.1:29500")).expect("r").dropped);
        assert!(net.route(1, sa("10.77.0.1:40000")).expect("r").dropped);
        assert!(!net.route(0, sa("10.77.0.1:40000")).expect("r").dropped);
        let t = std::time::Instant::now();
        let e = net
            .connect(1, sa("10.77.0.1:40000"), Duration::from_millis(50))
            .expect_err("dropped");
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
        assert!(t.elapsed() >= Duration::from_millis(50));
    }

    #[test]
    fn a_listener_bound_on_the_mapping_is_reached_through_the_fabric_only() {
        let net = VNet::build(2, &[]);
        let real0 = net.real_ip(0, IpAddr::V4(fabric_ip(0))).expect("eth0");
        let l = TcpListener::bind(SocketAddr::new(real0, 0)).expect("bind 127.77.0.1");
        let shown = net.virtual_of(0, l.local_addr().expect("addr"));
        assert_eq!(shown.ip(), IpAddr::V4(fabric_ip(0)));
        net.connect(1, shown, Duration::from_secs(2))
            .expect("node 1 reaches node 0's fabric address");
        // The same port on node 1's own docker0 has nobody listening.
        let docker = SocketAddr::new("172.17.0.1".parse().expect("ip"), shown.port());
        let l2 = TcpListener::bind(SocketAddr::new(
            net.real_ip(0, docker.ip()).expect("docker0"),
            shown.port(),
        ));
        assert!(l2.is_ok(), "node 0's docker0 is a different address");
        let e = net
            .connect(1, docker, Duration::from_secs(2))
            .expect_err("refused");
        assert_eq!(e.kind(), io::ErrorKind::ConnectionRefused);
    }

    #[test]
    fn the_view_round_trips_through_the_environment_format() {
        let net = VNet::build(3, &["eth0".into(), "eno1".into()]);
        let (k, v) = net.env_for(1);
        assert_eq!(k, ENV);
        let view: View = serde_json::from_str(&v).expect("json");
        assert_eq!(view.node, 1);
        assert_eq!(view.net.ifaces(1)[1].name, "eno1");
        assert_eq!(view.net.ifaces(2)[1].name, "eth0");
    }
}
