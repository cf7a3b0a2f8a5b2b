//! The launcher's side of the GPU labs: find NCCL, ask a child process what the driver and
//! NCCL say (the launcher itself never loads CUDA), choose the backend, and give the ranks the
//! environment they need.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::comm::nccl::Probe;
use crate::comm::ncclfind::{self, Found};

/// What the machine offers, as seen from the launcher.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Machine {
    pub probe: Probe,
    /// Where NCCL was found, or why not.
    #[serde(skip)]
    pub nccl: Result<Found, String>,
}

impl Machine {
    pub fn gpus(&self) -> usize {
        self.probe.gpus.len()
    }

    /// The environment every NCCL rank needs: LD_LIBRARY_PATH with NCCL's folder first, and
    /// NCCL's log on stderr (by default NCCL_DEBUG prints to stdout, where the rank's reports
    /// to the launcher go, and a log line could land in the middle of one).
    pub fn rank_env(&self) -> Vec<(String, String)> {
        let mut env = Vec::new();
        if let Ok(f) = &self.nccl {
            env.push((
                "LD_LIBRARY_PATH".into(),
                ncclfind::ld_library_path(f, std::env::var("LD_LIBRARY_PATH").ok().as_deref()),
            ));
        }
        if std::env::var_os("NCCL_DEBUG_FILE").is_none() {
            env.push(("NCCL_DEBUG_FILE".into(), "/dev/stderr".into()));
        }
        env
    }

    /// Why the nccl backend cannot run here, with what still works; None when it can.
    pub fn nccl_unavailable(&self) -> Option<String> {
        let p = &self.probe;
        let why = if !p.driver_lib {
            "no NVIDIA driver here: libcuda.so.1 cannot be loaded".to_string()
        } else if p.gpus.is_empty() {
            format!(
                "the NVIDIA driver loads but reports no GPU{}",
                p.errors
                    .first()
                    .map(|e| format!(" ({e})"))
                    .unwrap_or_default()
            )
        } else if let Err(e) = &self.nccl {
            e.clone()
        } else if !p.nccl_lib {
            "NCCL was found but does not load (check that it matches the driver's CUDA version)"
                .to_string()
        } else {
            return None;
        };
        Some(format!(
            "the nccl backend needs NVIDIA GPUs and NCCL: {why}.\n\
             Everything else works on this machine: the lessons, the ring animation, quizzes and \
             drills, `ringlab bench --backend tcp` and `ringlab sanity --backend tcp` (real \
             collectives between real processes over TCP, measured like nccl-tests), and the hang \
             lab (`ringlab lab run docker0`)."
        ))
    }
}

/// Look at this machine: find NCCL, then run `ringlab __gpu-probe` with it on the library
/// path. A probe that crashes or hangs (a broken driver) is reported, not fatal.
pub fn machine() -> Machine {
    let nccl = ncclfind::find().map_err(|e| e.to_string());
    let mut m = Machine {
        probe: Probe::default(),
        nccl,
    };
    match run_probe(&m.rank_env()) {
        Ok(p) => m.probe = p,
        Err(e) => m.probe.errors.push(e),
    }
    m
}

fn run_probe(env: &[(String, String)]) -> Result<Probe, String> {
    let exe = super::self_exe().map_err(|e| format!("finding ringlab: {e}"))?;
    let mut child = Command::new(exe)
        .arg("__gpu-probe")
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("starting the GPU probe: {e}"))?;
    let start = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if start.elapsed() > Duration::from_secs(60) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err("the GPU probe did not finish in 60 s (a hung driver?)".into());
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(10)),
            Err(e) => return Err(format!("waiting for the GPU probe: {e}")),
        }
    }
    let out = child
        .wait_with_output()
        .map_err(|e| format!("reading the GPU probe: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(text.trim()).map_err(|e| {
        format!(
            "the GPU probe failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .last()
                .unwrap_or(&e.to_string())
        )
    })
}

/// `ringlab __gpu-probe`: print what the driver and NCCL say, as JSON.
pub fn probe_main() -> std::process::ExitCode {
    let p = crate::comm::nccl::probe();
    match serde_json::to_string(&p) {
        Ok(s) => {
            println!("{s}");
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{e}");
            std::process::ExitCode::from(1)
        }
    }
}

/// The backend `--backend auto|tcp|nccl` resolves to, and a line saying which and why.
pub fn choose(asked: &str, m: &Machine) -> Result<(super::Backend, String), String> {
    use super::Backend;
    match asked {
        "tcp" => Ok((Backend::Tcp, "backend tcp (asked for)".into())),
        "nccl" => match m.nccl_unavailable() {
            Some(why) => Err(why),
            None => Ok((Backend::Nccl, nccl_line(m, "asked for"))),
        },
        _ => match m.nccl_unavailable() {
            None if m.gpus() >= 2 => Ok((Backend::Nccl, nccl_line(m, "auto: 2 or more GPUs"))),
            None => Ok((
                Backend::Tcp,
                format!(
                    "backend tcp (auto: only {} GPU; a collective needs 2 or more GPUs to move data between them; --backend nccl runs anyway)",
                    m.gpus()
                ),
            )),
            Some(why) => Ok((
                Backend::Tcp,
                format!(
                    "backend tcp (auto: {})",
                    why.lines()
                        .next()
                        .unwrap_or("no GPUs")
                        .trim_end_matches('.')
                ),
            )),
        },
    }
}

fn nccl_line(m: &Machine, why: &str) -> String {
    format!(
        "backend nccl ({why}): {} GPU(s), NCCL {} from {}",
        m.gpus(),
        m.probe.nccl_version.as_deref().unwrap_or("?"),
        m.nccl
            .as_ref()
            .map(|f| format!("{} ({})", f.lib.display(), f.how))
            .unwrap_or_default()
    )
}

/// NCCL_ALGO for the schedule the learner asked for (NCCL has no naive algorithm).
pub fn nccl_algo(a: crate::collective::Algorithm) -> Result<&'static str, String> {
    use crate::collective::Algorithm;
    match a {
        Algorithm::Ring => Ok("Ring"),
        Algorithm::Tree => Ok("Tree"),
        other => Err(format!(
            "--algo {}: NCCL has no such algorithm; use ring or tree (passed to NCCL as NCCL_ALGO)",
            other.name()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::Backend;

    fn no_gpu() -> Machine {
        Machine {
            probe: Probe::default(),
            nccl: Err("NCCL not found".into()),
        }
    }

    fn gpus(n: usize) -> Machine {
        let mut p = Probe {
            driver_lib: true,
            nccl_lib: true,
            nccl_version: Some("2.21.5".into()),
            ..Default::default()
        };
        for i in 0..n {
            p.gpus.push(crate::comm::nccl::Gpu {
                ordinal: i,
                name: "NVIDIA H200".into(),
                memory_bytes: 141 << 30,
                compute_capability: "9.0".into(),
            });
        }
        Machine {
            probe: p,
            nccl: Ok(Found {
                lib: "/usr/lib/libnccl.so.2".into(),
                dir: "/tmp/l".into(),
                linked: true,
                how: "system library directory".into(),
            }),
        }
    }

    #[test]
    fn auto_falls_back_to_tcp_without_gpus_and_says_why() {
        let (b, why) = choose("auto", &no_gpu()).expect("auto never fails");
        assert_eq!(b, Backend::Tcp);
        assert!(why.contains("no NVIDIA driver"), "{why}");
        let e = choose("nccl", &no_gpu()).expect_err("nccl refuses");
        assert!(e.contains("Everything else works"), "{e}");
    }

    #[test]
    fn auto_takes_nccl_from_two_gpus_and_tcp_with_one() {
        assert_eq!(choose("auto", &gpus(2)).expect("ok").0, Backend::Nccl);
        let (b, why) = choose("auto", &gpus(1)).expect("ok");
        assert_eq!(b, Backend::Tcp);
        assert!(why.contains("only 1 GPU"), "{why}");
        assert_eq!(choose("nccl", &gpus(1)).expect("ok").0, Backend::Nccl);
        assert_eq!(choose("tcp", &gpus(8)).expect("ok").0, Backend::Tcp);
    }

    #[test]
    fn ranks_get_the_nccl_folder_first_on_their_library_path() {
        let env = gpus(2).rank_env();
        assert_eq!(env[0].0, "LD_LIBRARY_PATH");
        assert!(env[0].1.starts_with("/tmp/l:/usr/lib"), "{env:?}");
        if std::env::var_os("NCCL_DEBUG_FILE").is_none() {
            assert!(env.contains(&("NCCL_DEBUG_FILE".into(), "/dev/stderr".into())));
        }
    }

    #[test]
    fn the_probe_child_answers_on_this_machine() {
        // Runs the real `__gpu-probe` path only from the binary; here the in-process probe
        // is safe because it checks the libraries first.
        let p = crate::comm::nccl::probe();
        let m = Machine {
            probe: p.clone(),
            nccl: ncclfind::find().map_err(|e| e.to_string()),
        };
        if p.gpus.is_empty() {
            assert!(m.nccl_unavailable().is_some());
        }
    }
}
