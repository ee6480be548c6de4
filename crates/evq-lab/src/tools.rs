//! The programs the lab runs beside itself, found once per run: the `evq` program
//! (for `evq serve`, `evq dead` and `evq load` as child processes) and the
//! installed peers (httperf, wrk, nginx, h2o, lighttpd, cc, pkg-config).
//!
//! The lab is a library: it may run inside `evq lab`, inside a test binary, or
//! inside someone else's program. So it does not assume its own executable is
//! `evq`. [`Tools::resolve`] takes, in order: an explicit path (`evq lab
//! --evq-bin PATH`); the current executable if it is named `evq`; an `evq` built
//! beside the current executable (`target/debug/deps/x` → `target/debug/evq`),
//! or in a `target/release` or `target/debug` above it; then `evq` on `PATH`.
//! Each candidate must answer `--version` as evq does.

use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The programs one lab run uses.
#[derive(Clone, Debug)]
pub struct Tools {
    evq: Result<PathBuf, String>,
}

/// The option that names the `evq` program explicitly.
pub const EVQ_BIN_OPTION: &str = "--evq-bin";

impl Tools {
    /// Finds the `evq` program (see the module documentation for the order).
    ///
    /// # Errors
    /// `explicit` is given but is not an `evq` program. (No `evq` found at all is
    /// not an error here: only the scenarios that need one fail, saying how to
    /// name it.)
    pub fn resolve(explicit: Option<&Path>) -> io::Result<Tools> {
        if let Some(path) = explicit {
            return match is_evq(path) {
                Ok(()) => Ok(Tools {
                    evq: Ok(path.to_path_buf()),
                }),
                Err(why) => Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("{EVQ_BIN_OPTION} {}: {why}", path.display()),
                )),
            };
        }
        let exe = std::env::current_exe().ok();
        let found = evq_candidates(exe.as_deref())
            .into_iter()
            .find(|p| is_evq(p).is_ok());
        Ok(Tools {
            evq: found.ok_or_else(|| {
                format!(
                    "no `evq` program found (not this executable, not built beside it in target/, not on PATH); build it with `cargo build --release -p evq-cli` or name it with {EVQ_BIN_OPTION} PATH"
                )
            }),
        })
    }

    /// Tools with a known `evq` program (tests, callers that built one).
    pub fn with_evq(path: PathBuf) -> Tools {
        Tools { evq: Ok(path) }
    }

    /// The `evq` program.
    ///
    /// # Errors
    /// `NotFound`, saying where the lab looked and naming [`EVQ_BIN_OPTION`].
    pub fn evq(&self) -> io::Result<&Path> {
        self.evq
            .as_deref()
            .map_err(|why| io::Error::new(io::ErrorKind::NotFound, why.clone()))
    }

    /// An installed program by name: the usual system directories first (the
    /// servers live in `sbin`, which a user's `PATH` may lack), then `PATH`.
    pub fn find(name: &str) -> Option<PathBuf> {
        let path = std::env::var_os("PATH").unwrap_or_default();
        ["/usr/sbin", "/usr/bin", "/usr/local/sbin", "/usr/local/bin"]
            .iter()
            .map(PathBuf::from)
            .chain(std::env::split_paths(&path))
            .map(|d| d.join(name))
            .find(|p| p.is_file())
    }
}

/// Where an `evq` program may be, in order of preference, given the current
/// executable.
fn evq_candidates(exe: Option<&Path>) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Some(exe) = exe {
        if exe.file_name().is_some_and(|n| n == "evq") {
            out.push(exe.to_path_buf());
        }
        if let Some(dir) = exe.parent() {
            out.push(dir.join("evq"));
            if let Some(up) = dir.parent() {
                out.push(up.join("evq"));
            }
            for a in dir.ancestors() {
                out.push(a.join("target/release/evq"));
                out.push(a.join("target/debug/evq"));
            }
        }
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    out.extend(std::env::split_paths(&path).map(|d| d.join("evq")));
    out.dedup();
    out
}

/// Whether `path` runs and says it is evq (`evq --version` prints "evq X.Y.Z").
fn is_evq(path: &Path) -> Result<(), String> {
    if !path.is_file() {
        return Err("no such file".into());
    }
    let out = Command::new(path)
        .arg("--version")
        .output()
        .map_err(|e| format!("cannot run it: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    if out.status.success() && text.starts_with("evq ") {
        Ok(())
    } else {
        Err(format!(
            "not an evq program (`--version` printed {:?})",
            text.trim()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn candidates_start_with_this_exe_when_it_is_evq_and_look_beside_it() {
        let c = evq_candidates(Some(Path::new("/w/target/release/evq")));
        assert_eq!(c[0], Path::new("/w/target/release/evq"));
        let c = evq_candidates(Some(Path::new("/w/target/debug/deps/evq_lab-1234")));
        assert!(!c.contains(&PathBuf::from("/w/target/debug/deps/evq_lab-1234")));
        let debug = c.iter().position(|p| p == Path::new("/w/target/debug/evq"));
        let release = c
            .iter()
            .position(|p| p == Path::new("/w/target/release/evq"));
        assert!(debug.is_some() && release.is_some(), "{c:?}");
        assert!(
            debug < release,
            "the build beside the executable comes first: {c:?}"
        );
    }

    #[test]
    fn an_explicit_path_must_be_evq() {
        let e = Tools::resolve(Some(Path::new("/nonexistent/evq"))).unwrap_err();
        assert!(e.to_string().contains(EVQ_BIN_OPTION), "{e}");
        let e = Tools::resolve(Some(Path::new("/bin/true"))).unwrap_err();
        assert!(e.to_string().contains("not an evq program"), "{e}");
    }

    #[test]
    fn a_missing_evq_names_the_option() {
        let tools = Tools {
            evq: Err(format!("none; name it with {EVQ_BIN_OPTION} PATH")),
        };
        let e = tools.evq().unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
        assert!(e.to_string().contains(EVQ_BIN_OPTION));
    }

    #[test]
    fn system_programs_are_found() {
        assert!(Tools::find("sh").is_some());
        assert!(Tools::find("no-such-program-evq-lab").is_none());
    }
}
