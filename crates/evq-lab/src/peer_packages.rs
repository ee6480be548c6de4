//! The peers' Debian packages, and what the lab does when some are missing.
//!
//! The list is `scripts/peer-packages.txt`, which `scripts/install-peers.sh`
//! reads too: one list. Before it measures, `evq lab` looks each peer package up
//! (`dpkg-query`) and decides ([`plan`], a pure function the tests drive with a
//! fake query):
//!
//! - all present: nothing to do;
//! - some missing, installing allowed, root, `apt-get` there: it installs them
//!   (saying which and why), with services kept from starting (the lab runs the
//!   servers itself, on its own ports and configs);
//! - otherwise it says which report rows will be missing and the exact command
//!   that fills them, and the report says so on its first screen.

use std::io;
use std::path::Path;
use std::process::Command;

/// The list, as the repository has it.
const LIST: &str = include_str!("../../../scripts/peer-packages.txt");

/// One row of the list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeerPackage {
    /// The Debian package.
    pub package: &'static str,
    /// What the report calls it; `None` for packages only the tests need.
    pub shown_as: Option<&'static str>,
    /// Which scenarios use it, and as what.
    pub used_by: &'static str,
}

/// Every row of `scripts/peer-packages.txt`.
pub fn all() -> Vec<PeerPackage> {
    LIST.lines()
        .filter(|l| !l.trim_start().starts_with('#') && !l.trim().is_empty())
        .filter_map(|l| {
            let mut cols = l.split('|').map(str::trim);
            let package = cols.next()?;
            let shown_as = cols.next()?;
            let used_by = cols.next()?;
            Some(PeerPackage {
                package,
                shown_as: (shown_as != "-").then_some(shown_as),
                used_by,
            })
        })
        .collect()
}

/// The rows the lab itself needs (the ones the report shows).
pub fn for_the_lab() -> Vec<PeerPackage> {
    all().into_iter().filter(|p| p.shown_as.is_some()).collect()
}

/// What the machine allows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Machine {
    /// The lab runs as root (apt needs it).
    pub root: bool,
    /// `apt-get` is there (a Debian-like system).
    pub apt: bool,
}

impl Machine {
    /// This machine.
    pub fn here() -> Machine {
        // SAFETY: geteuid(2) has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        let apt = ["/usr/bin/apt-get", "/bin/apt-get"]
            .iter()
            .any(|p| Path::new(p).exists());
        Machine { root, apt }
    }
}

/// What to do about the peers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Plan {
    /// Every peer package is installed.
    AllPresent,
    /// Install these now.
    Install(Vec<PeerPackage>),
    /// These are missing and will stay so: `why`, and the command that would
    /// install them.
    Missing {
        /// The packages.
        packages: Vec<PeerPackage>,
        /// Why the lab does not install them.
        why: String,
        /// What the reader can run.
        command: String,
    },
}

/// The command that installs `packages` on Debian.
pub fn install_command(packages: &[PeerPackage]) -> String {
    let names: Vec<&str> = packages.iter().map(|p| p.package).collect();
    format!(
        "sudo apt-get install -y --no-install-recommends {} (or scripts/install-peers.sh)",
        names.join(" ")
    )
}

/// Decides what to do, given which packages are `installed`, the `machine`, and
/// whether installing is `allowed` (`evq lab --no-install-peers` forbids it).
pub fn plan(
    packages: &[PeerPackage],
    installed: impl Fn(&str) -> bool,
    machine: Machine,
    allowed: bool,
) -> Plan {
    let missing: Vec<PeerPackage> = packages
        .iter()
        .copied()
        .filter(|p| !installed(p.package))
        .collect();
    if missing.is_empty() {
        return Plan::AllPresent;
    }
    let why = if !allowed {
        "--no-install-peers was given"
    } else if !machine.apt {
        "there is no apt-get here (not a Debian-like system)"
    } else if !machine.root {
        "the lab is not running as root"
    } else {
        return Plan::Install(missing);
    };
    Plan::Missing {
        command: install_command(&missing),
        packages: missing,
        why: why.to_string(),
    }
}

/// Whether dpkg says `package` is installed.
pub fn dpkg_installed(package: &str) -> bool {
    Command::new("dpkg-query")
        .args(["-W", "-f=${Status}", package])
        .output()
        .is_ok_and(|o| o.stdout.starts_with(b"install ok installed"))
}

/// Installs `packages` with apt-get, keeping their services from starting (a
/// `policy-rc.d` that answers 101 while apt runs) and stopping any that did.
///
/// # Errors
/// apt-get's failure, with its last lines.
pub fn install(packages: &[PeerPackage]) -> io::Result<()> {
    let policy = Path::new("/usr/sbin/policy-rc.d");
    let had_policy = policy.exists();
    if !had_policy {
        std::fs::write(policy, "#!/bin/sh\nexit 101\n")?;
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(policy, std::fs::Permissions::from_mode(0o755))?;
    }
    let result = (|| {
        run_apt(&["update", "-qq"])?;
        let mut args = vec!["install", "-y", "-qq", "--no-install-recommends"];
        args.extend(packages.iter().map(|p| p.package));
        run_apt(&args)
    })();
    if !had_policy {
        let _ = std::fs::remove_file(policy);
    }
    for service in ["nginx", "h2o", "lighttpd"] {
        let _ = Command::new("systemctl")
            .args(["disable", "--now", service])
            .output();
        let _ = Command::new("pkill").args(["-x", service]).output();
    }
    result
}

fn run_apt(args: &[&str]) -> io::Result<()> {
    let out = Command::new("apt-get")
        .args(args)
        .env("DEBIAN_FRONTEND", "noninteractive")
        .output()?;
    if out.status.success() {
        return Ok(());
    }
    let text = String::from_utf8_lossy(&out.stderr);
    let tail: Vec<&str> = text.lines().rev().take(5).collect();
    Err(io::Error::other(format!(
        "apt-get {} failed ({}): {}",
        args.join(" "),
        out.status,
        tail.into_iter().rev().collect::<Vec<_>>().join(" / ")
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROOT_APT: Machine = Machine {
        root: true,
        apt: true,
    };

    #[test]
    fn the_list_has_the_lab_peers_and_the_test_tools() {
        let lab: Vec<&str> = for_the_lab().iter().map(|p| p.package).collect();
        for p in [
            "nginx-light",
            "h2o",
            "lighttpd",
            "httperf",
            "wrk",
            "libev-dev",
        ] {
            assert!(lab.contains(&p), "{p} missing from {lab:?}");
        }
        let every: Vec<&str> = all().iter().map(|p| p.package).collect();
        assert!(every.contains(&"chromium") && !lab.contains(&"chromium"));
        assert!(all().iter().all(|p| !p.used_by.is_empty()));
    }

    #[test]
    fn nothing_to_do_when_everything_is_installed() {
        assert_eq!(
            plan(&for_the_lab(), |_| true, ROOT_APT, true),
            Plan::AllPresent
        );
        // Even where nothing could be installed.
        let bare = Machine {
            root: false,
            apt: false,
        };
        assert_eq!(
            plan(&for_the_lab(), |_| true, bare, false),
            Plan::AllPresent
        );
    }

    #[test]
    fn a_bare_machine_as_root_with_apt_installs_what_is_missing() {
        let have = ["h2o", "wrk"];
        match plan(&for_the_lab(), |p| have.contains(&p), ROOT_APT, true) {
            Plan::Install(list) => {
                let names: Vec<&str> = list.iter().map(|p| p.package).collect();
                assert!(names.contains(&"nginx-light") && names.contains(&"httperf"));
                assert!(!names.contains(&"h2o") && !names.contains(&"wrk"));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn when_it_cannot_install_it_says_why_and_how() {
        let cases = [
            (ROOT_APT, false, "--no-install-peers"),
            (
                Machine {
                    root: false,
                    apt: true,
                },
                true,
                "not running as root",
            ),
            (
                Machine {
                    root: true,
                    apt: false,
                },
                true,
                "no apt-get",
            ),
        ];
        for (machine, allowed, reason) in cases {
            match plan(&for_the_lab(), |p| p != "nginx-light", machine, allowed) {
                Plan::Missing {
                    packages,
                    why,
                    command,
                } => {
                    assert_eq!(packages.len(), 1);
                    assert!(why.contains(reason), "{why}");
                    assert!(command.contains("apt-get install") && command.contains("nginx-light"));
                }
                other => panic!("{reason}: {other:?}"),
            }
        }
    }
}
