//! Finding NCCL for the rank processes. cudarc dlopens `libnccl.so` (and a few versioned names,
//! but not `libnccl.so.2`), and glibc reads `LD_LIBRARY_PATH` only when a process starts. So the
//! launcher looks for the library itself (LD_LIBRARY_PATH, the system library directories, the
//! `nvidia/nccl/lib` folder of the nvidia-nccl-cu12/cu13 Python wheels in every site-packages
//! it can find), and where only `libnccl.so.2` exists it makes a private directory holding a
//! `libnccl.so` link. The directory goes on every rank's `LD_LIBRARY_PATH`.
//!
//! Nothing here loads CUDA or NCCL: this runs in the launcher, which never does.

use std::path::{Path, PathBuf};

/// Where NCCL was found and what a child needs to load it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// The library file itself (`…/libnccl.so.2` or `…/libnccl.so`).
    pub lib: PathBuf,
    /// The directory to put first on LD_LIBRARY_PATH: it holds a `libnccl.so`.
    pub dir: PathBuf,
    /// `dir` is our private directory with a `libnccl.so` link to `lib`.
    pub linked: bool,
    /// Where it was found, in words ("LD_LIBRARY_PATH", "system", "pip wheel …").
    pub how: String,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FindError {
    #[error(
        "NCCL not found: no libnccl.so or libnccl.so.2 in {} place(s) searched ({}). Install it with `pip install nvidia-nccl-cu12` (or cu13), or the libnccl2 package, or add its folder to LD_LIBRARY_PATH",
        searched.len(),
        preview(searched)
    )]
    NotFound { searched: Vec<PathBuf> },
    #[error("found {lib} but could not make the libnccl.so link in {dir}: {err}")]
    Link {
        lib: PathBuf,
        dir: PathBuf,
        err: String,
    },
}

fn preview(p: &[PathBuf]) -> String {
    let mut s: Vec<String> = p.iter().take(4).map(|x| x.display().to_string()).collect();
    if p.len() > 4 {
        s.push("…".into());
    }
    s.join(", ")
}

/// A directory to look in, and how to describe a hit there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    pub dir: PathBuf,
    pub how: String,
}

/// The places searched on this machine, in order.
pub fn default_places() -> Vec<Place> {
    let mut v = Vec::new();
    if let Ok(ld) = std::env::var("LD_LIBRARY_PATH") {
        v.extend(ld_places(&ld));
    }
    for d in [
        "/usr/lib/x86_64-linux-gnu",
        "/usr/lib/aarch64-linux-gnu",
        "/usr/lib64",
        "/usr/lib",
        "/usr/local/lib",
        "/usr/local/cuda/lib64",
        "/usr/local/cuda/targets/x86_64-linux/lib",
        "/usr/local/nccl/lib",
        "/opt/nccl/lib",
    ] {
        v.push(Place {
            dir: d.into(),
            how: "system library directory".into(),
        });
    }
    for sp in site_packages() {
        v.push(wheel_place(&sp));
    }
    v
}

fn ld_places(ld: &str) -> Vec<Place> {
    ld.split(':')
        .filter(|d| !d.is_empty())
        .map(|d| Place {
            dir: d.into(),
            how: "LD_LIBRARY_PATH".into(),
        })
        .collect()
}

fn wheel_place(site: &Path) -> Place {
    Place {
        dir: site.join("nvidia/nccl/lib"),
        how: format!("pip wheel nvidia-nccl in {}", site.display()),
    }
}

/// Every site-packages / dist-packages folder under the usual Python prefixes (system, /usr/local,
/// conda, the active virtualenv, users' ~/.local), found by listing directories, not by
/// running Python.
pub fn site_packages() -> Vec<PathBuf> {
    let mut prefixes: Vec<PathBuf> = vec![
        "/usr/lib".into(),
        "/usr/local/lib".into(),
        "/opt/conda/lib".into(),
    ];
    for var in ["VIRTUAL_ENV", "CONDA_PREFIX"] {
        if let Ok(p) = std::env::var(var) {
            prefixes.push(Path::new(&p).join("lib"));
        }
    }
    if let Ok(h) = std::env::var("HOME") {
        prefixes.push(Path::new(&h).join(".local/lib"));
    }
    if let Ok(homes) = std::fs::read_dir("/home") {
        for h in homes.flatten() {
            prefixes.push(h.path().join(".local/lib"));
        }
    }
    prefixes.push("/root/.local/lib".into());
    let mut out = Vec::new();
    for p in prefixes {
        let Ok(rd) = std::fs::read_dir(&p) else {
            continue;
        };
        let mut pys: Vec<PathBuf> = rd
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with("python3"))
            .map(|e| e.path())
            .collect();
        pys.sort();
        for py in pys {
            for sub in ["site-packages", "dist-packages"] {
                let d = py.join(sub);
                if d.is_dir() && !out.contains(&d) {
                    out.push(d);
                }
            }
        }
    }
    out
}

/// The private link directory for this user.
pub fn default_link_dir() -> PathBuf {
    // SAFETY: getuid has no preconditions.
    let uid = unsafe { libc::getuid() };
    std::env::temp_dir().join(format!("ringlab-nccl-{uid}"))
}

/// Find NCCL in `places`; where only `libnccl.so.2` exists, link it as `libnccl.so` in `link_dir`.
pub fn find_in(places: &[Place], link_dir: &Path) -> Result<Found, FindError> {
    for p in places {
        let plain = p.dir.join("libnccl.so");
        if plain.exists() {
            return Ok(Found {
                lib: plain,
                dir: p.dir.clone(),
                linked: false,
                how: p.how.clone(),
            });
        }
        if let Some(versioned) = versioned_lib(&p.dir) {
            let lib = std::fs::canonicalize(&versioned).unwrap_or(versioned);
            link(&lib, link_dir).map_err(|err| FindError::Link {
                lib: lib.clone(),
                dir: link_dir.to_path_buf(),
                err,
            })?;
            return Ok(Found {
                lib,
                dir: link_dir.to_path_buf(),
                linked: true,
                how: p.how.clone(),
            });
        }
    }
    Err(FindError::NotFound {
        searched: places.iter().map(|p| p.dir.clone()).collect(),
    })
}

/// Find NCCL on this machine.
pub fn find() -> Result<Found, FindError> {
    find_in(&default_places(), &default_link_dir())
}

/// `libnccl.so.2`, else the highest `libnccl.so.2.x.y`, in `dir`.
fn versioned_lib(dir: &Path) -> Option<PathBuf> {
    let two = dir.join("libnccl.so.2");
    if two.exists() {
        return Some(two);
    }
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("libnccl.so.2."))
        .map(|e| e.path())
        .collect();
    v.sort();
    v.pop()
}

/// Make `dir/libnccl.so` point at `lib`. The directory must be ours and not a symlink (it
/// lives in a shared temporary directory).
fn link(lib: &Path, dir: &Path) -> Result<(), String> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    match std::fs::symlink_metadata(dir) {
        Ok(m) => {
            // SAFETY: getuid has no preconditions.
            let uid = unsafe { libc::getuid() };
            if !m.is_dir() || m.uid() != uid {
                return Err(format!(
                    "{} exists and is not a directory owned by uid {uid}",
                    dir.display()
                ));
            }
        }
        Err(_) => std::fs::DirBuilder::new()
            .mode(0o700)
            .recursive(true)
            .create(dir)
            .map_err(|e| e.to_string())?,
    }
    let target = dir.join("libnccl.so");
    if std::fs::read_link(&target).is_ok_and(|t| t == lib) {
        return Ok(());
    }
    let tmp = dir.join(format!(".libnccl.so.{}", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    std::os::unix::fs::symlink(lib, &tmp).map_err(|e| e.to_string())?;
    std::fs::rename(&tmp, &target).map_err(|e| e.to_string())
}

/// The LD_LIBRARY_PATH a child needs: the found directory first, then what was already set.
pub fn ld_library_path(found: &Found, current: Option<&str>) -> String {
    let mut parts = vec![found.dir.display().to_string()];
    if found.linked
        && let Some(real) = found.lib.parent()
    {
        // The wheel's own folder too, for any library next to NCCL.
        parts.push(real.display().to_string());
    }
    for p in current.unwrap_or("").split(':').filter(|p| !p.is_empty()) {
        if !parts.iter().any(|x| x == p) {
            parts.push(p.to_string());
        }
    }
    parts.join(":")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree() -> PathBuf {
        let d = std::env::temp_dir().join(format!(
            "ringlab-ncclfind-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).expect("mkdir");
        d
    }

    #[test]
    fn only_the_versioned_library_gets_a_private_link() {
        let root = tree();
        let site = root.join("lib/python3.12/site-packages");
        let lib_dir = site.join("nvidia/nccl/lib");
        std::fs::create_dir_all(&lib_dir).expect("mkdir");
        std::fs::write(lib_dir.join("libnccl.so.2"), b"\x7fELF fake").expect("write");
        let empty = root.join("usr/lib");
        std::fs::create_dir_all(&empty).expect("mkdir");
        let places = vec![
            Place {
                dir: empty,
                how: "system library directory".into(),
            },
            wheel_place(&site),
        ];
        let link_dir = root.join("links");
        let f = find_in(&places, &link_dir).expect("found");
        assert!(f.linked);
        assert_eq!(f.dir, link_dir);
        assert!(f.how.contains("pip wheel"), "{f:?}");
        let link = link_dir.join("libnccl.so");
        assert_eq!(
            std::fs::read_link(&link).expect("a link"),
            std::fs::canonicalize(lib_dir.join("libnccl.so.2")).expect("canon")
        );
        assert_eq!(
            std::fs::read(&link).expect("through the link"),
            b"\x7fELF fake"
        );
        // Children get the link directory first, then what was set.
        let ld = ld_library_path(&f, Some("/opt/x:/opt/y"));
        assert!(ld.starts_with(&link_dir.display().to_string()), "{ld}");
        assert!(ld.ends_with("/opt/x:/opt/y"), "{ld}");
        // Idempotent: a second search keeps the same link.
        assert_eq!(find_in(&places, &link_dir).expect("again"), f);
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn a_plain_libnccl_so_is_used_where_it_is() {
        let root = tree();
        std::fs::write(root.join("libnccl.so"), b"x").expect("write");
        let f = find_in(
            &ld_places(&format!("::{}", root.display())),
            &root.join("links"),
        )
        .expect("found");
        assert!(!f.linked);
        assert_eq!(f.dir, root);
        assert_eq!(f.how, "LD_LIBRARY_PATH");
        assert!(!root.join("links").exists(), "no link made");
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn a_full_version_name_is_found_too() {
        let root = tree();
        std::fs::write(root.join("libnccl.so.2.21.5"), b"x").expect("write");
        let f = find_in(&ld_places(&root.display().to_string()), &root.join("l")).expect("found");
        assert!(f.lib.ends_with("libnccl.so.2.21.5"));
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn nothing_found_says_where_it_looked_and_how_to_install() {
        let root = tree();
        let e =
            find_in(&ld_places(&root.display().to_string()), &root.join("l")).expect_err("absent");
        let msg = e.to_string();
        assert!(msg.contains("NCCL not found"), "{msg}");
        assert!(msg.contains("nvidia-nccl-cu12"), "{msg}");
        assert!(msg.contains(&root.display().to_string()), "{msg}");
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn a_link_dir_owned_by_someone_else_or_a_file_is_refused() {
        let root = tree();
        std::fs::write(root.join("libnccl.so.2"), b"x").expect("write");
        let trap = root.join("not-a-dir");
        std::fs::write(&trap, b"").expect("write");
        let e = find_in(&ld_places(&root.display().to_string()), &trap).expect_err("refused");
        assert!(matches!(e, FindError::Link { .. }), "{e}");
        let _ = std::fs::remove_dir_all(&root);
    }
}
