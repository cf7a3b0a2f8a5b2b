//! `ringlab doctor --log FILE...`: read real NCCL_DEBUG=INFO logs (one file per rank, or one
//! with several ranks interleaved) and name the known misconfigurations, each with the
//! `file:line` evidence it rests on and the fix. Exit 0: nothing found; 1: findings; 2: a file
//! could not be read, or no --log was given.

use std::path::PathBuf;
use std::process::ExitCode;

use crate::lab::doctor::{Finding, analyze};

#[derive(Debug, clap::Args)]
pub struct DoctorArgs {
    /// NCCL_DEBUG=INFO (or TRACE) log files: one per rank, or one with ranks interleaved.
    #[arg(long = "log", value_name = "FILE", num_args = 1..)]
    pub logs: Vec<PathBuf>,
    /// Print the findings as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn doctor(args: &DoctorArgs) -> anyhow::Result<ExitCode> {
    if args.logs.is_empty() {
        eprintln!(
            "ringlab doctor: give NCCL logs to read: ringlab doctor --log FILE...\n\
             (run the job with NCCL_DEBUG=INFO and keep every rank's output). Checking this \
             machine's GPUs and NICs directly arrives with the NCCL backend."
        );
        return Ok(ExitCode::from(2));
    }
    let mut files = Vec::with_capacity(args.logs.len());
    for p in &args.logs {
        match std::fs::read(p) {
            Ok(bytes) => files.push((
                p.display().to_string(),
                String::from_utf8_lossy(&bytes).into_owned(),
            )),
            Err(e) => {
                eprintln!("ringlab doctor: cannot read {}: {e}", p.display());
                return Ok(ExitCode::from(2));
            }
        }
    }
    let findings = analyze(&files);
    if args.json {
        #[derive(serde::Serialize)]
        struct Out<'a> {
            files: Vec<&'a str>,
            findings: &'a [Finding],
        }
        let out = Out {
            files: files.iter().map(|(n, _)| n.as_str()).collect(),
            findings: &findings,
        };
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        print!("{}", render(&files, &findings));
    }
    Ok(if findings.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn render(files: &[(String, String)], findings: &[Finding]) -> String {
    let mut s = String::new();
    let nccl_lines: usize = files
        .iter()
        .map(|(_, t)| t.lines().filter(|l| l.contains(" NCCL ")).count())
        .sum();
    if nccl_lines == 0 {
        s.push_str(
            "note: no NCCL log lines found; run the job with NCCL_DEBUG=INFO and keep every \
             rank's output\n",
        );
    }
    if findings.is_empty() {
        s.push_str("no known misconfiguration found\n");
        return s;
    }
    s.push_str(&format!("{} finding(s)\n", findings.len()));
    for f in findings {
        s.push_str(&format!("\n[{}] {}\n", f.kind, f.summary));
        for (file, line, text) in &f.evidence {
            s.push_str(&format!("  {file}:{line}: {text}\n"));
        }
        s.push_str(&format!("  fix: {}\n", f.fix));
    }
    s
}
