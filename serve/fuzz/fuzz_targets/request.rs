//! Every parser a request reaches before any GPU work: ids, query strings, shapes, dtypes,
//! bearer headers, hex, JSON bodies, .npy and raw uploads, and the config. The first byte picks
//! the parser, the rest is its input. None may panic; an accepted upload must hold exactly the
//! bytes its dtype and shape take.
#![no_main]

use kiln_serve::parse::{self, DispatchRequest, KernelRequest, OpRequest, TensorQuery};
use libfuzzer_sys::fuzz_target;

/// libfuzzer-sys makes every panic abort (a finding). One is known and contained: npyz multiplies
/// a header's dimensions unchecked, which overflows (a panic under this build's debug assertions)
/// on a huge declared shape; `npy::decode` catches it and answers BAD_REQUEST, as the service's
/// debug builds do (release builds wrap, and the declared size is then checked against the data).
/// So panics from npyz unwind to that catch; any other still aborts.
fn contain_npyz_overflow() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let fuzzer_hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let in_npyz = info.location().is_some_and(|l| l.file().contains("npyz"));
            if !in_npyz {
                fuzzer_hook(info);
            }
        }));
    });
}

fuzz_target!(|data: &[u8]| {
    contain_npyz_overflow();
    let Some((&which, rest)) = data.split_first() else { return };
    let text = String::from_utf8_lossy(rest);
    match which % 8 {
        0 => {
            let _ = parse::parse_id(&text);
            let _ = parse::parse_shape(&text);
            let _ = parse::parse_dtype(&text);
            let _ = parse::bearer(&text);
            let _ = parse::parse_hex(&text);
        }
        1 => {
            let _ = parse::parse_json::<OpRequest>(rest);
            let _ = parse::parse_json::<KernelRequest>(rest);
            let _ = parse::parse_json::<DispatchRequest>(rest);
            let _ = parse::parse_session_request(rest);
        }
        2 | 3 => {
            // A .npy upload.
            if let Ok(a) = parse::decode_upload(&TensorQuery::default(), rest) {
                let n = a.shape.iter().product::<usize>() * a.dtype.size();
                assert_eq!(n, a.bytes.len());
            }
        }
        4 | 5 => {
            // A query string up to the first NUL, then a raw body.
            let cut = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
            let q = String::from_utf8_lossy(&rest[..cut]);
            let body = rest.get(cut + 1..).unwrap_or(&[]);
            if let Ok(q) = parse::parse_query::<TensorQuery>(Some(&q)) {
                let _ = parse::download_format(&q, Some(&q.format.clone().unwrap_or_default()));
                if let Ok(a) = parse::decode_upload(&q, body) {
                    let n = a.shape.iter().product::<usize>() * a.dtype.size();
                    assert_eq!(n, a.bytes.len());
                }
            }
        }
        _ => {
            let _ = kiln_serve::config::parse(&text);
        }
    }
});
