//! `ringlab bench --pairs --cluster SCENARIO`: the pairwise sendrecv sweep over a lab cluster's
//! nodes, staged as the scenario stages them.

use super::*;
use crate::lab::hang::scenario::{self, slow};

pub fn pairs(args: &BenchArgs) -> anyhow::Result<ExitCode> {
    let Some(name) = &args.cluster else {
        return exit2(
            "--pairs sweeps the nodes of a lab cluster: add --cluster SCENARIO (on one host \
             every pair of ranks shares the same loopback, so a sweep there says nothing)"
                .into(),
        );
    };
    let s = match scenario::find(name) {
        Ok(s) => s,
        Err(e) => return exit2(format!("--cluster: {e}")),
    };
    if s.slow.is_none() {
        let slow: Vec<String> = scenario::all()
            .0
            .into_iter()
            .filter(|x| x.slow.is_some())
            .map(|x| x.name)
            .collect();
        return exit2(format!(
            "--cluster {name}: that scenario stages no links to sweep; these do: {}",
            slow.join(", ")
        ));
    }
    let mut c = match scenario::cluster_here(&s, args.mode) {
        Ok(c) => c,
        Err(scenario::NoCluster::RanInUserNamespace(code)) => return Ok(ExitCode::from(code)),
        Err(scenario::NoCluster::Refused(e)) => return exit2(e),
    };
    if let Err(e) = slow::stage(&s, &mut c, None) {
        return exit2(format!("staging {name}'s links: {e}"));
    }
    if !args.json {
        let how = c.emulated_because.as_ref().map_or_else(
            || "network namespaces".to_string(),
            |w| format!("EMULATED ({w})"),
        );
        println!(
            "# {name}: {} nodes, {how}; one sendrecv job per pair",
            s.nodes
        );
    }
    let mut on = |m: &Msg| {
        if let Msg::Event(Event::Row {
            in_place: false, ..
        }) = m
        {
            eprint!(".");
        }
    };
    let m = match slow::sweep(&s, &c, None, &mut on) {
        Ok(m) => m,
        Err(e) => {
            eprintln!();
            eprintln!("ringlab bench --pairs: {e}");
            return Ok(ExitCode::from(1));
        }
    };
    eprintln!();
    if args.json {
        let v = serde_json::json!({ "cluster": name, "mode": c.mode(), "matrix": m, "outlier": m.outlier() });
        println!("{v}");
    } else {
        for l in m.lines("node") {
            println!("{l}");
        }
        match m.outlier() {
            Some(n) => println!("node {n} is in every slow pair: check its link first"),
            None => println!("no node stands out: every pair runs alike"),
        }
    }
    Ok(ExitCode::SUCCESS)
}
