//! A thread-local variable of the sampled thread, found where userspace said its process keeps it
//! (`sonde_abi::tls::TlsPlace`): shared by the readers of the OpenTelemetry thread context and of
//! Ruby's execution context.

use sonde_abi::tls::{TLS_DTV, TLS_SHARED, TLS_STATIC, TlsPlace};

use crate::user::user_u64;

/// The address of the variable `p` places, for the current thread; 0 when the thread has none (no
/// thread pointer, or a DTV that does not reach the module: the thread never touched it).
#[inline(always)]
pub fn address(p: &TlsPlace) -> Result<u64, ()> {
    if p.mode == TLS_SHARED {
        return Ok(p.offset as u64);
    }
    let tp = crate::regs::thread_pointer()?;
    if tp == 0 {
        return Ok(0);
    }
    match p.mode {
        TLS_STATIC => Ok(tp.wrapping_add(p.offset as u64)),
        TLS_DTV => {
            let dtv = user_u64(tp.wrapping_add(p.dtv_at as i64 as u64))?;
            if dtv == 0 {
                return Ok(0);
            }
            let len = user_u64(dtv.wrapping_add(p.dtv_len_at as i64 as u64))?;
            if u64::from(p.module) > len {
                return Ok(0);
            }
            let block = user_u64(dtv + u64::from(p.module) * u64::from(p.dtv_stride))?;
            // glibc marks a block not allocated yet with -1.
            if block == 0 || block == u64::MAX {
                return Ok(0);
            }
            Ok(block.wrapping_add(p.offset as u64))
        }
        _ => Err(()),
    }
}
