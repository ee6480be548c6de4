//! Choosing a backend by name for C callers, with `EVQ_EUNKNOWN_BACKEND` for a name
//! that does not exist (as opposed to one that exists but is unavailable here).

use crate::abi::EVQ_EUNKNOWN_BACKEND;
use crate::error::CError;
use evq::BackendKind;
use std::ffi::CStr;

/// The backend for `name`, or for `EVQ_BACKEND` / the best available when `None`.
pub(crate) fn resolve(name: Option<&str>) -> Result<BackendKind, CError> {
    let env;
    let name = match name {
        Some(n) => Some(n),
        None => {
            env = std::env::var("EVQ_BACKEND").ok();
            env.as_deref().filter(|n| !n.is_empty())
        }
    };
    match name {
        Some(n) => {
            let kind: BackendKind = n
                .parse()
                .map_err(|_| CError::new(EVQ_EUNKNOWN_BACKEND, libc::EINVAL))?;
            kind.available()?;
            Ok(kind)
        }
        None => Ok(BackendKind::from_env_or_best()?),
    }
}

/// The backend's name as a static C string.
pub(crate) fn c_name(kind: BackendKind) -> &'static CStr {
    match kind {
        BackendKind::SelectClassic => c"select",
        BackendKind::SelectImproved => c"select-improved",
        BackendKind::Poll => c"poll",
        BackendKind::Epoll => c"epoll",
        BackendKind::RtSig => c"rtsig",
        BackendKind::RtSigBulk => c"rtsig-bulk",
        BackendKind::Uring => c"uring",
        BackendKind::Kmod => c"kmod",
        BackendKind::KmodRing => c"kmod-ring",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_match_the_core() {
        for &kind in BackendKind::ALL {
            assert_eq!(c_name(kind).to_str().unwrap(), kind.name());
        }
    }

    #[test]
    fn unknown_name_has_its_own_code() {
        let e = resolve(Some("kqueue")).unwrap_err();
        assert_eq!(e.code, EVQ_EUNKNOWN_BACKEND);
        assert_eq!(resolve(Some("poll")).unwrap(), BackendKind::Poll);
    }
}
