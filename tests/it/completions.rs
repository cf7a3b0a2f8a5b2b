//! `ringlab completions SHELL`: every public command and flag, none of the internal ones.

use std::process::Command;

fn completions(shell: &str) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_ringlab"))
        .args(["completions", shell])
        .output()
        .expect("run ringlab completions");
    assert!(out.status.success(), "{shell}: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn completions_offer_public_commands_and_hide_internal_ones() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let text = completions(shell);
        for internal in [
            "__rank",
            "__netns-holder",
            "__gpu-probe",
            "__loopback",
            "__progress-stress",
            "try-fix",
        ] {
            assert!(!text.contains(internal), "{shell} offers {internal}");
        }
        // `--lessons` is for authors and named in `ringlab --help`; hidden from option lists
        // (and so from completions) since the labs, bench and doctor read no lessons (L29).
        for public in [
            "drill", "bench", "doctor", "minbytes", "track", "pairs", "help",
        ] {
            assert!(text.contains(public), "{shell} lacks {public}");
        }
    }
}
