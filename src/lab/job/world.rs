//! Which launcher started this process, and the world it says this process is one rank of:
//! torchrun (torch elastic, Kubernetes PyTorchJob), Slurm's `srun`, or an MPI launcher
//! (Open MPI's `mpirun`, PMIx, MPICH's Hydra). Pure: the environment comes in as a lookup, so
//! every launcher's variables are tested without the launcher.
//!
//! Detection order: MPI first, then torchrun, then Slurm. `mpirun` inside an sbatch script
//! leaves the script's `SLURM_PROCID=0` in every rank, and torchrun's workers inherit the
//! agent's `SLURM_*` too; an srun task is told from the batch script by `SLURM_STEP_ID`, which
//! only a step's tasks have (Slurm 22.05: the batch script also has SLURM_PROCID and
//! SLURM_NTASKS). scripts/slurm/FACTS.md has the variables each launcher was seen to set.

use std::fmt;

/// A launcher ringlab can run under, one rank per process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Launcher {
    Torchrun,
    Slurm,
    Mpi,
}

impl Launcher {
    pub fn name(self) -> &'static str {
        match self {
            Self::Torchrun => "torchrun",
            Self::Slurm => "slurm",
            Self::Mpi => "mpi",
        }
    }
}

impl fmt::Display for Launcher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// This process's place in the launcher's world.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct World {
    pub launcher: Launcher,
    pub rank: usize,
    pub size: usize,
    pub local_rank: usize,
    pub local_size: usize,
    /// Where rank 0 hosts the store, when the launcher says (MASTER_ADDR, or Slurm's first
    /// host of the step).
    pub master_addr: Option<String>,
    pub master_port: Option<u16>,
    /// The variables read, for the header and for error messages.
    pub read: Vec<&'static str>,
    /// What tells this job from another under the same launcher (a Slurm job and step, an
    /// Open MPI job id, torchrun's run id and master): the seed of the job's token and, where
    /// the launcher gives no MASTER_PORT, of its port.
    pub job: String,
}

impl World {
    /// The store's port: MASTER_PORT, else one derived from the job (15000-29999, below
    /// Linux's ephemeral range), the same in every rank.
    pub fn port(&self) -> u16 {
        self.master_port
            .unwrap_or_else(|| 15000 + (fnv(self.job.as_bytes()) % 15000) as u16)
    }

    /// The job's token (every rank's hello carries it): RINGLAB_TOKEN when the caller has one,
    /// else derived from the job, which keeps two jobs apart but does not keep strangers out.
    pub fn token(&self) -> [u8; 16] {
        let a = fnv(format!("ringlab/{}/{}", self.launcher, self.job).as_bytes());
        let b = fnv(format!("{}/{}", self.job, self.size).as_bytes());
        let mut t = [0u8; 16];
        t[..8].copy_from_slice(&a.to_le_bytes());
        t[8..].copy_from_slice(&b.to_le_bytes());
        t
    }
}

/// FNV-1a, 64 bits: a stable hash of the job's name (not for security).
pub(crate) fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// Read `name` as a number: absent is None, present and not a number is an error naming it.
fn num(env: &dyn Fn(&str) -> Option<String>, name: &'static str) -> Result<Option<usize>, String> {
    match env(name) {
        None => Ok(None),
        Some(v) => v
            .trim()
            .parse()
            .map(Some)
            .map_err(|_| format!("{name}={v:?} is not a number")),
    }
}

/// Two variables that come together: both or neither, the first below the second.
fn pair(
    env: &dyn Fn(&str) -> Option<String>,
    (rank, size): (&'static str, &'static str),
) -> Result<Option<(usize, usize)>, String> {
    match (num(env, rank)?, num(env, size)?) {
        (None, None) => Ok(None),
        (Some(_), None) => Err(format!("{rank} is set but {size} is not")),
        (None, Some(_)) => Err(format!("{size} is set but {rank} is not")),
        (Some(r), Some(0)) => Err(format!(
            "{size}=0: a world has at least one rank ({rank}={r})"
        )),
        (Some(r), Some(n)) if r >= n => Err(format!("{rank}={r} is not below {size}={n}")),
        (Some(r), Some(n)) => Ok(Some((r, n))),
    }
}

fn port(env: &dyn Fn(&str) -> Option<String>) -> Result<Option<u16>, String> {
    match env("MASTER_PORT") {
        None => Ok(None),
        // 0 would have rank 0 bind a random port the others cannot know (L3).
        Some(v) => match v.trim().parse::<u16>() {
            Ok(p) if p > 0 => Ok(Some(p)),
            _ => Err(format!("MASTER_PORT={v:?} is not a port (1-65535)")),
        },
    }
}

/// A node's share of the world can be no larger than the world (L4).
fn local_within(
    (local, local_name): (usize, &str),
    (size, size_name): (usize, &str),
) -> Result<(), String> {
    if local > size {
        return Err(format!(
            "{local_name}={local} is larger than {size_name}={size}: a node cannot hold more \
             ranks than the whole job"
        ));
    }
    Ok(())
}

/// torchrun's workers (torch/distributed/run.py, elastic agent): RANK, WORLD_SIZE,
/// LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT. Under torchrun's agent
/// (TORCHELASTIC_RUN_ID set) MASTER_PORT is taken: the agent on node 0 serves its own TCPStore
/// there, which the workers share (TORCHELASTIC_USE_AGENT_STORE). ringlab's store, a
/// different protocol, listens on the next port. A plain RANK/WORLD_SIZE environment (a
/// Kubernetes PyTorchJob without torchrun, a hand-written one) keeps MASTER_PORT.
fn torchrun(env: &dyn Fn(&str) -> Option<String>) -> Result<Option<World>, String> {
    let Some((rank, size)) = pair(env, ("RANK", "WORLD_SIZE"))? else {
        return Ok(None);
    };
    // Without LOCAL_* (a PyTorchJob's pods run without torchrun, one process each): one host
    // only when rank 0 is on loopback; else every process counts as a node of its own, and
    // ranks reach each other over the network.
    let on_loopback = env("MASTER_ADDR").is_some_and(|a| {
        a == "localhost"
            || a.parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback())
    });
    let (local_rank, local_size) = match pair(env, ("LOCAL_RANK", "LOCAL_WORLD_SIZE"))? {
        Some(l) => l,
        None if on_loopback => (rank, size),
        None => (0, 1),
    };
    local_within((local_size, "LOCAL_WORLD_SIZE"), (size, "WORLD_SIZE"))?;
    Ok(Some(World {
        launcher: Launcher::Torchrun,
        rank,
        size,
        local_rank,
        local_size,
        job: format!(
            "{}@{}:{}",
            env("TORCHELASTIC_RUN_ID").unwrap_or_default(),
            env("MASTER_ADDR").unwrap_or_default(),
            env("MASTER_PORT").unwrap_or_default()
        ),
        master_addr: env("MASTER_ADDR"),
        master_port: match (port(env)?, env("TORCHELASTIC_RUN_ID")) {
            (Some(p), Some(_)) => Some(p.checked_add(1).ok_or(
                "MASTER_PORT=65535 under torchrun: its agent's store has it and there is no next port for ringlab's",
            )?),
            (p, _) => p,
        },
        read: vec![
            "RANK",
            "WORLD_SIZE",
            "LOCAL_RANK",
            "LOCAL_WORLD_SIZE",
            "MASTER_ADDR",
            "MASTER_PORT",
        ],
    }))
}

/// A task of a Slurm step (`srun`): SLURM_PROCID of SLURM_STEP_NUM_TASKS, SLURM_LOCALID; the
/// master from MASTER_ADDR, else the step's first host (SLURM_STEP_NODELIST); the port from
/// MASTER_PORT, else derived from the job and step. Without SLURM_STEP_ID this is no task but
/// a batch script or an salloc shell (which also have SLURM_PROCID and SLURM_NTASKS): None.
fn slurm(env: &dyn Fn(&str) -> Option<String>) -> Result<Option<World>, String> {
    let Some(step) = env("SLURM_STEP_ID") else {
        return Ok(None);
    };
    let size_var = if env("SLURM_STEP_NUM_TASKS").is_some() {
        "SLURM_STEP_NUM_TASKS"
    } else {
        "SLURM_NTASKS"
    };
    let Some((rank, size)) = pair(env, ("SLURM_PROCID", size_var))? else {
        return Err(format!(
            "SLURM_STEP_ID={step} says this is a task of an srun step, but SLURM_PROCID and \
             {size_var} are not both set"
        ));
    };
    let local_rank = num(env, "SLURM_LOCALID")?.unwrap_or(0);
    let nodes = num(env, "SLURM_STEP_NUM_NODES")?.unwrap_or(1);
    if nodes == 0 {
        return Err("SLURM_STEP_NUM_NODES=0: a step has at least one node".into());
    }
    // "2" or "2(x3)" or "2,1": the first node's count is this node's where all are alike.
    let local_size = match env("SLURM_STEP_TASKS_PER_NODE") {
        Some(v) => v
            .split(|c: char| !c.is_ascii_digit())
            .next()
            .and_then(|d| d.parse().ok())
            .filter(|&n: &usize| n > 0)
            .ok_or_else(|| {
                format!("SLURM_STEP_TASKS_PER_NODE={v:?} is not a task count (at least 1)")
            })?,
        None if nodes == 1 => size,
        None => size.div_ceil(nodes),
    };
    local_within((local_size, "SLURM_STEP_TASKS_PER_NODE"), (size, size_var))?;
    let first_host = match env("SLURM_STEP_NODELIST").or_else(|| env("SLURM_JOB_NODELIST")) {
        Some(list) => expand_hostlist(&list)
            .map_err(|e| format!("SLURM_STEP_NODELIST={list:?}: {e}"))?
            .into_iter()
            .next(),
        None => None,
    };
    let one_node = nodes == 1;
    Ok(Some(World {
        launcher: Launcher::Slurm,
        rank,
        size,
        local_rank,
        local_size,
        // One node: loopback, whatever the node is called.
        master_addr: env("MASTER_ADDR")
            .or_else(|| one_node.then(|| "127.0.0.1".to_string()))
            .or(first_host),
        master_port: port(env)?,
        read: vec![
            "SLURM_STEP_ID",
            "SLURM_PROCID",
            size_var,
            "SLURM_LOCALID",
            "SLURM_STEP_NODELIST",
            "SLURM_JOB_ID",
        ],
        job: format!("{}.{step}", env("SLURM_JOB_ID").unwrap_or_default()),
    }))
}

/// An MPI rank: Open MPI's OMPI_COMM_WORLD_* (also under PMIx), else MPICH/Hydra's PMI_RANK
/// and PMI_SIZE. Every rank on one node (LOCAL_SIZE == SIZE) means loopback for the master.
fn mpi(env: &dyn Fn(&str) -> Option<String>) -> Result<Option<World>, String> {
    let (rank, size, names) = match pair(env, ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"))? {
        Some((r, n)) => (
            r,
            n,
            ("OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"),
        ),
        None => match pair(env, ("PMI_RANK", "PMI_SIZE"))? {
            Some((r, n)) => (r, n, ("MPI_LOCALRANKID", "MPI_LOCALNRANKS")),
            None => return Ok(None),
        },
    };
    let (local_rank, local_size) = pair(env, names)?.unwrap_or((rank, size));
    let one_node = local_size == size;
    Ok(Some(World {
        launcher: Launcher::Mpi,
        rank,
        size,
        local_rank,
        local_size,
        master_addr: env("MASTER_ADDR").or_else(|| one_node.then(|| "127.0.0.1".to_string())),
        master_port: port(env)?,
        job: env("PMIX_NAMESPACE")
            .or_else(|| env("OMPI_MCA_ess_base_jobid"))
            .or_else(|| env("PMI_JOBID"))
            .unwrap_or_default(),
        read: if names.0.starts_with("OMPI") {
            vec![
                "OMPI_COMM_WORLD_RANK",
                "OMPI_COMM_WORLD_SIZE",
                names.0,
                names.1,
            ]
        } else {
            vec!["PMI_RANK", "PMI_SIZE", names.0, names.1]
        },
    }))
}

/// The launcher's world, if one started this process: `forced` names which to read
/// (`--launcher`), None detects (MPI, then torchrun, then Slurm; see the module's note).
pub fn detect(
    env: &dyn Fn(&str) -> Option<String>,
    forced: Option<Launcher>,
) -> Result<Option<World>, String> {
    match forced {
        Some(Launcher::Torchrun) => torchrun(env)?
            .map(Some)
            .ok_or_else(|| "--launcher torchrun: RANK and WORLD_SIZE are not set".into()),
        Some(Launcher::Slurm) => slurm(env)?.map(Some).ok_or_else(|| {
            "--launcher slurm: SLURM_STEP_ID is not set, so this is not a task of an srun step \
             (run it under srun, also inside an sbatch script)"
                .into()
        }),
        Some(Launcher::Mpi) => mpi(env)?.map(Some).ok_or_else(|| {
            "--launcher mpi: OMPI_COMM_WORLD_RANK/SIZE (or PMI_RANK/PMI_SIZE) are not set".into()
        }),
        None => Ok(match mpi(env)? {
            Some(w) => Some(w),
            None => match torchrun(env)? {
                Some(w) => Some(w),
                None => slurm(env)?,
            },
        }),
    }
}

/// `--launcher` as typed: auto (None inside: detect), none, or one launcher.
pub fn parse_choice(s: &str) -> Result<Choice, NotALauncher> {
    match s.trim().to_ascii_lowercase().as_str() {
        "auto" => Ok(Choice::Auto),
        "none" => Ok(Choice::None),
        "torchrun" | "torch" | "torchelastic" => Ok(Choice::Forced(Launcher::Torchrun)),
        "slurm" | "srun" => Ok(Choice::Forced(Launcher::Slurm)),
        "mpi" | "mpirun" | "openmpi" | "pmi" => Ok(Choice::Forced(Launcher::Mpi)),
        other => Err(NotALauncher(other.to_string())),
    }
}

/// A `--launcher` that names none.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a launcher: auto, none, torchrun, slurm or mpi")]
pub struct NotALauncher(pub String);

/// What `--launcher` asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Choice {
    /// Join a launcher's world when the environment shows one.
    #[default]
    Auto,
    /// Ignore any launcher: ringlab starts its own ranks.
    None,
    Forced(Launcher),
}

impl Choice {
    /// The world to join under this choice, read from `env`.
    pub fn world(self, env: &dyn Fn(&str) -> Option<String>) -> Result<Option<World>, String> {
        match self {
            Choice::None => Ok(None),
            Choice::Auto => detect(env, None),
            Choice::Forced(l) => detect(env, Some(l)),
        }
    }
}

/// Slurm's host-list syntax: `gpu[01-04,07],login1` → gpu01 gpu02 gpu03 gpu04 gpu07 login1.
/// Ranges keep their zero padding; several brackets in one name multiply out.
pub fn expand_hostlist(list: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    for item in split_top(list)? {
        let mut names = vec![String::new()];
        let mut rest = item.as_str();
        while !rest.is_empty() {
            match rest.find('[') {
                None => {
                    names.iter_mut().for_each(|n| n.push_str(rest));
                    rest = "";
                }
                Some(open) => {
                    let close = rest[open..]
                        .find(']')
                        .map(|c| open + c)
                        .ok_or_else(|| format!("`{item}`: `[` without `]`"))?;
                    let prefix = &rest[..open];
                    let choices = expand_ranges(&rest[open + 1..close])
                        .map_err(|e| format!("`{item}`: {e}"))?;
                    names = names
                        .iter()
                        .flat_map(|n| choices.iter().map(move |c| format!("{n}{prefix}{c}")))
                        .collect();
                    rest = &rest[close + 1..];
                }
            }
        }
        out.extend(names);
    }
    if out.is_empty() {
        return Err("an empty host list".into());
    }
    Ok(out)
}

/// Split at commas outside brackets.
fn split_top(list: &str) -> Result<Vec<String>, String> {
    let (mut parts, mut cur, mut depth) = (Vec::new(), String::new(), 0i32);
    for c in list.trim().chars() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(std::mem::take(&mut cur));
                continue;
            }
            _ => {}
        }
        if !(0..=1).contains(&depth) {
            return Err(format!("`{list}`: unbalanced or nested brackets"));
        }
        cur.push(c);
    }
    if depth != 0 {
        return Err(format!("`{list}`: `[` without `]`"));
    }
    parts.push(cur);
    if parts.iter().any(String::is_empty) {
        return Err(format!("`{list}`: an empty name"));
    }
    Ok(parts)
}

/// `01-04,07` → 01 02 03 04 07 (zero padding kept, as Slurm does).
fn expand_ranges(spec: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    for part in spec.split(',') {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        let lo: u64 = a
            .parse()
            .map_err(|_| format!("`{part}` is not a number or range"))?;
        let hi: u64 = b
            .parse()
            .map_err(|_| format!("`{part}` is not a number or range"))?;
        if hi < lo {
            return Err(format!("`{part}` counts down"));
        }
        if hi - lo > 100_000 {
            return Err(format!("`{part}`: more than 100000 hosts"));
        }
        let width = a.len();
        out.extend((lo..=hi).map(|n| format!("{n:0width$}")));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| {
            vars.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn torchrun_sets_the_world_and_the_master() {
        let vars = [
            ("RANK", "3"),
            ("WORLD_SIZE", "8"),
            ("LOCAL_RANK", "1"),
            ("LOCAL_WORLD_SIZE", "2"),
            ("MASTER_ADDR", "10.0.0.1"),
            ("MASTER_PORT", "29500"),
        ];
        let w = detect(&env(&vars), None).expect("ok").expect("a world");
        assert_eq!(w.launcher, Launcher::Torchrun);
        assert_eq!((w.rank, w.size, w.local_rank, w.local_size), (3, 8, 1, 2));
        assert_eq!(w.master_addr.as_deref(), Some("10.0.0.1"));
        assert_eq!(w.master_port, Some(29500), "no agent: MASTER_PORT is free");
        // A pod of a PyTorchJob without torchrun: no LOCAL_*, rank 0 elsewhere.
        let pod = [
            ("RANK", "1"),
            ("WORLD_SIZE", "2"),
            ("MASTER_ADDR", "nccl-sanity-master-0"),
            ("MASTER_PORT", "23456"),
        ];
        let w = detect(&env(&pod), None).expect("ok").expect("a world");
        assert_eq!((w.local_rank, w.local_size), (0, 1), "a node of its own");
        let here = [
            ("RANK", "1"),
            ("WORLD_SIZE", "2"),
            ("MASTER_ADDR", "127.0.0.1"),
        ];
        let w = detect(&env(&here), None).expect("ok").expect("a world");
        assert_eq!((w.local_rank, w.local_size), (1, 2), "loopback: one host");
        let mut under_agent = vars.to_vec();
        under_agent.push(("TORCHELASTIC_RUN_ID", "none"));
        let w = detect(&env(&under_agent), None)
            .expect("ok")
            .expect("a world");
        assert_eq!(w.master_port, Some(29501), "the agent's store has 29500");
    }

    #[test]
    fn partial_or_conflicting_variables_are_named() {
        for (vars, needle) in [
            (&[("RANK", "0")][..], "RANK is set but WORLD_SIZE is not"),
            (
                &[("RANK", "4"), ("WORLD_SIZE", "4")][..],
                "RANK=4 is not below WORLD_SIZE=4",
            ),
            (
                &[("RANK", "x"), ("WORLD_SIZE", "4")][..],
                "RANK=\"x\" is not a number",
            ),
            (
                &[
                    ("SLURM_STEP_ID", "0"),
                    ("SLURM_PROCID", "0"),
                    ("SLURM_NTASKS", "2"),
                    ("SLURM_STEP_NODELIST", "gpu[01-"),
                ][..],
                "SLURM_STEP_NODELIST",
            ),
            (
                &[("OMPI_COMM_WORLD_SIZE", "2")][..],
                "OMPI_COMM_WORLD_SIZE is set but OMPI_COMM_WORLD_RANK is not",
            ),
            (
                &[("RANK", "0"), ("WORLD_SIZE", "1"), ("MASTER_PORT", "70000")][..],
                "MASTER_PORT",
            ),
        ] {
            let e = detect(&env(vars), None).expect_err("an error");
            assert!(e.contains(needle), "{vars:?}: {e}");
        }
        assert_eq!(detect(&env(&[]), None), Ok(None));
        let e = detect(&env(&[]), Some(Launcher::Slurm)).expect_err("forced");
        assert!(e.contains("srun"), "{e}");
    }

    #[test]
    fn contradictory_or_zero_launcher_values_are_refused_by_name() {
        for (vars, says) in [
            (
                &[
                    ("SLURM_STEP_ID", "0"),
                    ("SLURM_PROCID", "0"),
                    ("SLURM_STEP_NUM_TASKS", "2"),
                    ("SLURM_STEP_NUM_NODES", "0"),
                    ("SLURM_JOB_ID", "5"),
                ][..],
                "SLURM_STEP_NUM_NODES=0",
            ),
            (
                &[
                    ("SLURM_STEP_ID", "0"),
                    ("SLURM_PROCID", "0"),
                    ("SLURM_STEP_NUM_TASKS", "2"),
                    ("SLURM_STEP_TASKS_PER_NODE", "0"),
                ][..],
                "SLURM_STEP_TASKS_PER_NODE",
            ),
            (
                &[
                    ("RANK", "0"),
                    ("WORLD_SIZE", "2"),
                    ("LOCAL_RANK", "0"),
                    ("LOCAL_WORLD_SIZE", "8"),
                    ("MASTER_ADDR", "127.0.0.1"),
                    ("MASTER_PORT", "29500"),
                ][..],
                "LOCAL_WORLD_SIZE=8 is larger than WORLD_SIZE=2",
            ),
            (
                &[("RANK", "0"), ("WORLD_SIZE", "2"), ("MASTER_PORT", "0")][..],
                "MASTER_PORT=\"0\" is not a port (1-65535)",
            ),
        ] {
            let e = detect(&env(vars), None).expect_err(says);
            assert!(e.contains(says), "{e}");
        }
    }

    #[test]
    fn slurm_and_mpi_worlds() {
        // An srun task of a 2-node step (values as Slurm 22.05 sets them).
        let vars = [
            ("SLURM_STEP_ID", "0"),
            ("SLURM_PROCID", "1"),
            ("SLURM_NTASKS", "8"),
            ("SLURM_STEP_NUM_TASKS", "4"),
            ("SLURM_STEP_NUM_NODES", "2"),
            ("SLURM_STEP_TASKS_PER_NODE", "2(x2)"),
            ("SLURM_LOCALID", "1"),
            ("SLURM_STEP_NODELIST", "gpu[07-08]"),
            ("SLURM_JOB_ID", "123456"),
        ];
        let w = detect(&env(&vars), None).expect("ok").expect("slurm");
        assert_eq!(
            (w.launcher, w.rank, w.size, w.local_rank, w.local_size),
            (Launcher::Slurm, 1, 4, 1, 2),
            "the step's tasks, not the job's"
        );
        assert_eq!(w.master_addr.as_deref(), Some("gpu07"));
        assert_eq!(w.master_port, None);
        assert!((15000..30000).contains(&w.port()), "{}", w.port());
        // The batch script has SLURM_PROCID and SLURM_NTASKS but no step: not a rank.
        let batch = [
            ("SLURM_PROCID", "0"),
            ("SLURM_NTASKS", "2"),
            ("SLURM_JOB_ID", "9"),
        ];
        assert_eq!(detect(&env(&batch), None), Ok(None));
        // mpirun inside that script: every rank inherits SLURM_PROCID=0; MPI wins.
        let mpi_in_batch = [
            ("SLURM_PROCID", "0"),
            ("SLURM_NTASKS", "2"),
            ("OMPI_COMM_WORLD_RANK", "1"),
            ("OMPI_COMM_WORLD_SIZE", "2"),
            ("PMIX_NAMESPACE", "1979777025"),
        ];
        let w = detect(&env(&mpi_in_batch), None).expect("ok").expect("mpi");
        assert_eq!((w.launcher, w.rank), (Launcher::Mpi, 1));
        let other = World {
            job: "1979777026".into(),
            ..w.clone()
        };
        assert_ne!(w.token(), other.token(), "two jobs, two tokens");
        assert_ne!(w.port(), other.port());
        let vars = [
            ("OMPI_COMM_WORLD_RANK", "1"),
            ("OMPI_COMM_WORLD_SIZE", "2"),
            ("OMPI_COMM_WORLD_LOCAL_RANK", "1"),
            ("OMPI_COMM_WORLD_LOCAL_SIZE", "2"),
        ];
        let w = detect(&env(&vars), None).expect("ok").expect("mpi");
        assert_eq!((w.launcher, w.rank, w.size), (Launcher::Mpi, 1, 2));
        assert_eq!(
            w.master_addr.as_deref(),
            Some("127.0.0.1"),
            "one node: loopback"
        );
    }

    #[test]
    fn host_lists_expand_like_slurm() {
        assert_eq!(
            expand_hostlist("gpu[01-04,07],login1").expect("ok"),
            ["gpu01", "gpu02", "gpu03", "gpu04", "gpu07", "login1"]
        );
        assert_eq!(
            expand_hostlist("n[1-2]-ib[0-1]").expect("ok"),
            ["n1-ib0", "n1-ib1", "n2-ib0", "n2-ib1"]
        );
        assert_eq!(expand_hostlist("node9").expect("ok"), ["node9"]);
        for bad in ["", "gpu[01-", "gpu[4-1]", "gpu[a-b]", "a,,b", "x[[1]]"] {
            assert!(expand_hostlist(bad).is_err(), "{bad:?}");
        }
    }
}
