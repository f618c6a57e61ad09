//! Core errors as JavaScript exceptions: js/kiln.js registers a factory that builds its
//! `KilnError` subclass for a code; before that (or without it) a plain Error with `code` and
//! `codeName` set.

use std::cell::RefCell;
use wasm_bindgen::prelude::*;

pub(crate) type JsResult<T> = Result<T, JsValue>;

thread_local! {
    static FACTORY: RefCell<Option<js_sys::Function>> = const { RefCell::new(None) };
}

/// Registers `factory(code, name, message)`, which returns the exception to throw.
#[wasm_bindgen(js_name = setErrorFactory)]
pub fn set_error_factory(factory: js_sys::Function) {
    FACTORY.with(|f| *f.borrow_mut() = Some(factory));
}

pub(crate) fn js_err(e: kiln_core::Error) -> JsValue {
    let code = e.code();
    let (num, name, msg) = (code as u32, code.name(), e.message().to_string());
    let made = FACTORY.with(|f| {
        f.borrow().as_ref().and_then(|f| f.call3(&JsValue::NULL, &num.into(), &name.into(), &msg.as_str().into()).ok())
    });
    made.unwrap_or_else(|| {
        let err = js_sys::Error::new(&msg);
        let _ = js_sys::Reflect::set(&err, &"code".into(), &num.into());
        let _ = js_sys::Reflect::set(&err, &"codeName".into(), &name.into());
        err.into()
    })
}

/// An InvalidArgument error raised by the binding itself (a bad JavaScript value).
pub(crate) fn invalid(msg: impl Into<String>) -> JsValue {
    js_err(kiln_core::Error::InvalidArgument(msg.into()))
}
