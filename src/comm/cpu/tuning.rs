//! The data path's experiment switches, in one documented place. Each one exists to measure a
//! choice against its alternative (the README's transport numbers were taken this way); none
//! is needed to use ringlab. Every rank of a job inherits the launcher's environment, so every
//! rank reads the same values, once. `ringlab bench` names the ones set in its header.

use std::sync::OnceLock;

use crate::units::parse_size;

/// The switches, with the defaults the code was measured at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tuning {
    /// `RINGLAB_SEND_SLICE` (a size; 0 = unbounded): the most bytes one send call hands the
    /// kernel, so a big message goes out while its start is still in cache.
    pub send_slice: usize,
    /// `RINGLAB_P2P_MIN` (a size): messages from this size up go by single copy.
    pub p2p_min: usize,
    /// `RINGLAB_TCP_CC`: the data connections' congestion control (`system` keeps the
    /// kernel's).
    pub tcp_cc: String,
    /// `RINGLAB_SOCKBUF` (bytes; 0 = the kernel's autotuning): fixed socket buffers.
    pub sockbuf: usize,
    /// What could not be read, as `NAME=value: why; using default`.
    pub refused: Vec<String>,
}

/// Each switch: its variable and the default's text, in the order the header prints them.
pub const VARIABLES: [&str; 4] = [
    "RINGLAB_SEND_SLICE",
    "RINGLAB_P2P_MIN",
    "RINGLAB_TCP_CC",
    "RINGLAB_SOCKBUF",
];

impl Tuning {
    /// The defaults.
    pub fn measured() -> Tuning {
        Tuning {
            send_slice: super::engine::SEND_SLICE,
            p2p_min: super::cma::MIN,
            tcp_cc: super::net::TCP_CC.to_string(),
            sockbuf: 0,
            refused: Vec::new(),
        }
    }

    /// Read through `var` (the environment, or a test's map).
    pub fn read(var: impl Fn(&str) -> Option<String>) -> Tuning {
        let mut t = Tuning::measured();
        let mut refused = Vec::new();
        // A size; `zero` is what 0 means.
        let mut size = |name: &str, zero: usize| -> Option<usize> {
            let v = var(name)?;
            match parse_size(&v) {
                Ok(0) => Some(zero),
                Ok(n) => Some(usize::try_from(n).unwrap_or(usize::MAX)),
                Err(e) => {
                    refused.push(format!("{name}={v}: {e}; using the default"));
                    None
                }
            }
        };
        t.send_slice = size("RINGLAB_SEND_SLICE", usize::MAX).unwrap_or(t.send_slice);
        t.p2p_min = size("RINGLAB_P2P_MIN", 0).unwrap_or(t.p2p_min);
        if let Some(cc) = var("RINGLAB_TCP_CC") {
            t.tcp_cc = cc;
        }
        if let Some(v) = var("RINGLAB_SOCKBUF") {
            match v.trim().parse::<usize>() {
                Ok(n) => t.sockbuf = n,
                Err(e) => refused.push(format!("RINGLAB_SOCKBUF={v}: {e}; using the default")),
            }
        }
        t.refused = refused;
        t
    }

    /// This process's switches, read from the environment once.
    pub fn get() -> &'static Tuning {
        static NOW: OnceLock<Tuning> = OnceLock::new();
        NOW.get_or_init(|| Tuning::read(|n| std::env::var(n).ok()))
    }

    /// The switches set away from their defaults, as `NAME=value` (for the bench header).
    pub fn changed(&self) -> Vec<String> {
        let d = Tuning::measured();
        let size = |n: usize| match n {
            usize::MAX => "0 (unbounded)".to_string(),
            n => crate::units::format_bytes(n as u64),
        };
        let mut out = Vec::new();
        if self.send_slice != d.send_slice {
            out.push(format!("RINGLAB_SEND_SLICE={}", size(self.send_slice)));
        }
        if self.p2p_min != d.p2p_min {
            out.push(format!("RINGLAB_P2P_MIN={}", size(self.p2p_min)));
        }
        if self.tcp_cc != d.tcp_cc {
            out.push(format!("RINGLAB_TCP_CC={}", self.tcp_cc));
        }
        if self.sockbuf != d.sockbuf {
            out.push(format!("RINGLAB_SOCKBUF={}", self.sockbuf));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_are_what_was_measured_and_each_switch_reads_its_variable() {
        let none = Tuning::read(|_| None);
        assert_eq!(none, Tuning::measured());
        assert!(none.changed().is_empty());
        let set = Tuning::read(|n| {
            Some(
                match n {
                    "RINGLAB_SEND_SLICE" => "0",
                    "RINGLAB_P2P_MIN" => "4K",
                    "RINGLAB_TCP_CC" => "system",
                    _ => "65536",
                }
                .to_string(),
            )
        });
        assert_eq!(
            (
                set.send_slice,
                set.p2p_min,
                set.tcp_cc.as_str(),
                set.sockbuf
            ),
            (usize::MAX, 4096, "system", 65536)
        );
        assert_eq!(
            set.changed(),
            [
                "RINGLAB_SEND_SLICE=0 (unbounded)",
                "RINGLAB_P2P_MIN=4 KiB",
                "RINGLAB_TCP_CC=system",
                "RINGLAB_SOCKBUF=65536"
            ]
        );
        let bad = Tuning::read(|n| (n == "RINGLAB_SEND_SLICE").then(|| "lots".to_string()));
        assert_eq!(bad.send_slice, Tuning::measured().send_slice);
        assert_eq!(bad.refused.len(), 1, "{:?}", bad.refused);
        assert!(bad.refused[0].starts_with("RINGLAB_SEND_SLICE=lots: "));
    }
}
