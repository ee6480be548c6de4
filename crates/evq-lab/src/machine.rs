//! What the report says about the machine it ran on, and which peers it found.

use procfs::Current;
use serde::{Deserialize, Serialize};
use std::process::Command;

/// The machine, as far as a reader needs it to judge the numbers.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct MachineInfo {
    /// CPU model name from /proc/cpuinfo.
    pub cpu: String,
    /// Online CPUs.
    pub cores: usize,
    /// Total memory in MiB.
    pub memory_mib: u64,
    /// RLIMIT_NOFILE hard limit.
    pub nofile_hard: u64,
    /// Load average when the lab started (the machine is shared).
    pub loadavg_at_start: String,
    /// rustc that built evq.
    pub rustc: String,
}

/// Describes this machine.
pub fn machine() -> MachineInfo {
    let cpu = procfs::CpuInfo::current()
        .ok()
        .and_then(|c| c.model_name(0).map(|s| s.trim().to_string()))
        .unwrap_or_else(|| "unknown".into());
    let memory_mib = procfs::Meminfo::current().map_or(0, |m| m.mem_total / (1024 * 1024));
    let (_, nofile_hard) = rlimit::Resource::NOFILE.get().unwrap_or((0, 0));
    MachineInfo {
        cpu,
        cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
        memory_mib,
        nofile_hard,
        loadavg_at_start: crate::procinfo::loadavg_line(),
        rustc: command_line("rustc", &["--version"]).unwrap_or_else(|| "unknown".into()),
    }
}

/// `uname -srvm`.
pub fn kernel() -> String {
    command_line("uname", &["-srvm"]).unwrap_or_else(|| {
        std::fs::read_to_string("/proc/version")
            .unwrap_or_default()
            .trim()
            .to_string()
    })
}

/// The first line a command prints (stdout, else stderr), if it runs.
pub fn command_line(program: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(program).args(args).output().ok()?;
    let text = if out.stdout.is_empty() {
        out.stderr
    } else {
        out.stdout
    };
    String::from_utf8_lossy(&text)
        .lines()
        .next()
        .map(|l| l.trim().to_string())
        .filter(|l| !l.is_empty())
}

/// A peer implementation (library, server, tool) and whether this machine has it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PeerInfo {
    /// Name as people know it.
    pub name: String,
    /// Its Debian package.
    #[serde(default)]
    pub package: String,
    /// Version string, if installed.
    pub version: Option<String>,
    /// How to install it when missing.
    pub install: String,
}

fn dpkg_version(package: &str) -> Option<String> {
    let out = Command::new("dpkg-query")
        .args(["-W", "-f=${Status} ${Version}", package])
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    text.strip_prefix("install ok installed ")
        .map(|v| v.to_string())
}

/// The peers the lab compares against (`scripts/peer-packages.txt`), with
/// versions where installed.
pub fn peers() -> Vec<PeerInfo> {
    crate::peer_packages::for_the_lab()
        .into_iter()
        .map(|p| PeerInfo {
            name: p.shown_as.unwrap_or(p.package).to_string(),
            package: p.package.to_string(),
            version: dpkg_version(p.package),
            install: crate::peer_packages::install_command(&[p]),
        })
        .collect()
}
