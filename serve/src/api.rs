//! The HTTP surface: routes, the auth and metrics middleware, and the handlers. Handlers parse
//! with `parse` (pure), look ids up in the caller's tenant only (`state`), and run GPU work on the
//! blocking pool with the tenant's session current (`on_gpu`), under the tenant's concurrency
//! limit.

use crate::error::{
    ApiError, ApiResult, METHOD_NOT_ALLOWED, NOT_FOUND, NOT_READY, PAYLOAD_TOO_LARGE, REQUEST_TIMEOUT, SHUTTING_DOWN,
    UNAUTHORIZED,
};
use crate::npy;
use crate::parse::{self, Download, TensorQuery};
use crate::state::{AppState, Slot, Tenant};
use axum::body::{Body, Bytes};
use axum::extract::{MatchedPath, Path, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode, Uri};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use kiln_core::ops::by_name;
use kiln_core::{Kernel, Tensor};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::OwnedSemaphorePermit;

type St = State<Arc<AppState>>;

/// The tenant a request was authenticated as, put on the response for the metrics middleware.
#[derive(Clone)]
struct TenantLabel(String);

pub fn api_router(state: Arc<AppState>) -> Router {
    let v1 = Router::new()
        .route("/v1/sessions", post(create_session).get(list_sessions))
        .route("/v1/sessions/{sid}", get(session_stats).delete(close_session))
        .route("/v1/sessions/{sid}/tensors", post(upload).get(list_tensors))
        .route("/v1/sessions/{sid}/tensors/{tid}", get(download).delete(delete_tensor))
        .route("/v1/sessions/{sid}/ops/{op}", post(run_op))
        .route("/v1/sessions/{sid}/kernels", post(compile_kernel))
        .route("/v1/sessions/{sid}/kernels/{kid}/dispatch", post(dispatch_kernel))
        .route_layer(middleware::from_fn_with_state(state.clone(), authenticate));
    Router::new()
        .merge(v1)
        .merge(probes())
        .fallback(|| async { ApiError::new(NOT_FOUND, "no such route") })
        .method_not_allowed_fallback(|| async { ApiError::new(METHOD_NOT_ALLOWED, "method not allowed on this route") })
        .layer(middleware::from_fn_with_state(state.clone(), observe))
        .with_state(state)
}

pub fn metrics_router(state: Arc<AppState>) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .merge(probes())
        .fallback(|| async { ApiError::new(NOT_FOUND, "no such route") })
        .with_state(state)
}

fn probes() -> Router<Arc<AppState>> {
    Router::new().route("/health", get(health)).route("/ready", get(ready))
}

/// Alive, and the devices sessions are placed on (no load figures: this route is not
/// authenticated; the metrics port has them).
async fn health(State(st): St) -> Json<Value> {
    let devices: Vec<Value> = st
        .devices
        .iter()
        .map(|d| json!({"index": d.index, "name": d.name, "backend": d.backend, "type": d.device_type}))
        .collect();
    Json(json!({"status": "ok", "devices": devices}))
}

async fn metrics(State(st): St) -> Response {
    let text = tokio::task::spawn_blocking(move || st.metrics.render(&st.device_loads())).await.unwrap_or_default();
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response()
}

/// Ready: the device answers a tiny round trip in time (`ready`), and the service is not
/// shutting down.
async fn ready(State(st): St) -> Response {
    if *st.grace_over.borrow() {
        return ApiError::new(SHUTTING_DOWN, "the server is shutting down").into_response();
    }
    let devices = st.devices.iter().map(|d| d.index).collect();
    match st.readiness.check(devices).await {
        Ok(()) => Json(json!({"status": "ready"})).into_response(),
        Err(e) => ApiError::new(NOT_READY, format!("the GPU device is not available: {e}")).into_response(),
    }
}

/// Counts, times and bounds every request (the per-request time limit is here).
async fn observe(State(st): St, req: Request, next: Next) -> Response {
    let route = req.extensions().get::<MatchedPath>().map(|p| p.as_str().to_string()).unwrap_or_else(|| "other".into());
    let start = Instant::now();
    st.metrics.started();
    let limit = Duration::from_millis(st.config.request_timeout_ms);
    let mut grace_over = st.grace_over.subscribe();
    let resp = tokio::select! {
        r = tokio::time::timeout(limit, next.run(req)) => match r {
            Ok(r) => r,
            Err(_) => ApiError::new("TIMEOUT", format!("the request ran past the limit of {} ms", limit.as_millis()))
                .into_response(),
        },
        // Shutdown's grace period is over: answer now rather than be cut off without a word (the
        // GPU work, on a blocking thread, is not waited for).
        _ = grace_over.wait_for(|over| *over) => ApiError::new(
            SHUTTING_DOWN,
            "the server is shutting down and this request ran past its grace period; its result is lost",
        )
        .into_response(),
    };
    let tenant = resp.extensions().get::<TenantLabel>().map(|t| t.0.clone()).unwrap_or_else(|| "-".into());
    st.metrics.finished(&route, resp.status().as_u16(), &tenant, start.elapsed().as_secs_f64());
    resp
}

async fn authenticate(State(st): St, mut req: Request, next: Next) -> Response {
    let token = req.headers().get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).and_then(parse::bearer);
    let Some(tenant) = token.and_then(|t| st.tenant_for(t)) else {
        let mut r = ApiError::new(UNAUTHORIZED, "missing or unknown bearer token").into_response();
        r.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        return r;
    };
    let label = TenantLabel(tenant.name.clone());
    req.extensions_mut().insert(tenant);
    let mut resp = next.run(req).await;
    resp.extensions_mut().insert(label);
    resp
}

type Caller = Extension<Arc<Tenant>>;

/// Waits for one of the tenant's concurrency slots. Taken before a request's body is read, so
/// that a tenant's stalled or queued uploads wait for its own slots, not in the server's memory.
async fn take_slot(tenant: &Tenant) -> ApiResult<OwnedSemaphorePermit> {
    tenant.permits.clone().acquire_owned().await.map_err(|_| ApiError::new(SHUTTING_DOWN, "shutting down"))
}

/// Runs `f` on the blocking pool with `slot`'s session current, in the slot `permit`. The permit
/// is held until `f` returns, also when the request itself has timed out meanwhile: the tenant's
/// GPU work, not its requests, is what is bounded. Kiln's session numbers in error messages are
/// replaced by the session's id.
async fn on_gpu<T: Send + 'static>(
    permit: OwnedSemaphorePermit,
    slot: Option<Arc<Slot>>,
    f: impl FnOnce() -> ApiResult<T> + Send + 'static,
) -> ApiResult<T> {
    let task = tokio::task::spawn_blocking(move || {
        let _permit = permit;
        let guarded = move || {
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
                .unwrap_or_else(|p| Err(kiln_core::Error::from_panic(p).into()))
        };
        match slot {
            Some(s) => s.session.run(guarded).map_err(|mut e| {
                e.message = s.own_message(&e.message);
                e
            }),
            None => guarded(),
        }
    });
    task.await.unwrap_or_else(|_| Err(ApiError::new("INTERNAL", "the worker stopped")))
}

/// `on_gpu` in a slot taken now (requests without a body).
async fn in_slot<T: Send + 'static>(
    tenant: &Tenant,
    slot: Option<Arc<Slot>>,
    f: impl FnOnce() -> ApiResult<T> + Send + 'static,
) -> ApiResult<T> {
    on_gpu(take_slot(tenant).await?, slot, f).await
}

/// The body bytes a request has reserved, the tenant's and the server's; released on drop.
pub struct BodyHold {
    _tenant: OwnedSemaphorePermit,
    _server: OwnedSemaphorePermit,
}

/// Reads a body of at most `max_body_bytes`, call it in the tenant's slot: a larger declared or
/// sent body is PAYLOAD_TOO_LARGE, one cut short is BAD_REQUEST, one that stops arriving for
/// `body_read_timeout_ms` is REQUEST_TIMEOUT. Its bytes (the declared length, else the largest
/// body) are reserved from the tenant's and the server's `max_body_bytes_in_flight` before a
/// byte is read, and stay reserved while the returned hold lives.
async fn read_body(st: &AppState, tenant: &Tenant, headers: &HeaderMap, body: Body) -> ApiResult<(Bytes, BodyHold)> {
    use http_body_util::BodyExt;
    let max = st.config.max_body_bytes;
    let declared =
        headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
    let too_large = || ApiError::new(PAYLOAD_TOO_LARGE, format!("the body is over the limit of {max} bytes"));
    if declared.is_some_and(|n| n > max as u64) {
        return Err(too_large());
    }
    let want = declared.unwrap_or(max as u64);
    let shutting = || ApiError::new(SHUTTING_DOWN, "shutting down");
    let hold = BodyHold {
        _tenant: tenant.body_bytes.reserve(want).await.ok_or_else(shutting)?,
        _server: st.body_bytes.reserve(want).await.ok_or_else(shutting)?,
    };
    let stall = Duration::from_millis(st.config.body_read_timeout_ms);
    let mut body = http_body_util::Limited::new(body, max);
    let mut out = Vec::with_capacity(want.min(1 << 20) as usize);
    loop {
        let frame = match tokio::time::timeout(stall, body.frame()).await {
            Err(_) => {
                return Err(ApiError::new(
                    REQUEST_TIMEOUT,
                    format!("the body sent nothing for {} ms (body_read_timeout_ms)", stall.as_millis()),
                ))
            }
            Ok(None) => break,
            Ok(Some(Ok(f))) => f,
            Ok(Some(Err(e))) => {
                return Err(if e.is::<http_body_util::LengthLimitError>() {
                    too_large()
                } else {
                    ApiError::bad_request("the body could not be read in full")
                })
            }
        };
        if let Ok(data) = frame.into_data() {
            out.extend_from_slice(&data);
        }
    }
    Ok((Bytes::from(out), hold))
}

fn created(v: Value) -> Response {
    (StatusCode::CREATED, Json(v)).into_response()
}

fn tensor_json(id: u64, t: &Tensor) -> Value {
    json!({"id": id, "dtype": t.dtype().to_string(), "shape": t.shape(), "device": t.device().info().index})
}

fn stats_json(slot: &Slot) -> Value {
    let s = slot.session.stats();
    let (tensors, kernels) = slot.counts();
    json!({
        "id": slot.id,
        "device": slot.device,
        "tensors": tensors,
        "kernels": kernels,
        "bytes_in_use": s.bytes_in_use,
        "peak_bytes": s.peak_bytes,
        "ops_total": s.ops_total,
        "dispatches": s.dispatches,
        "kernels_compiled": s.kernels_compiled,
        "quota_exceeded": s.quota_exceeded,
        "compute_limit_hits": s.compute_limit_hits,
        "policy_rejections": s.policy_rejections,
    })
}

async fn create_session(State(st): St, Extension(t): Caller, headers: HeaderMap, body: Body) -> ApiResult<Response> {
    let req = {
        let _permit = take_slot(&t).await?;
        parse::parse_session_request(&read_body(&st, &t, &headers, body).await?.0)?
    };
    let slot = st.open_session(&t, req.device)?;
    let l = slot.session.limits();
    // Location names the new session: a load balancer in front of replicas learns from it which
    // replica holds the session (deploy/haproxy/haproxy.cfg).
    let location = HeaderValue::from_str(&format!("/v1/sessions/{}", slot.id))
        .map_err(|_| ApiError::new("INTERNAL", "a session id that is no header value"))?;
    let mut resp = created(json!({
        "id": slot.id,
        "device": slot.device,
        "limits": {
            "max_bytes": l.max_bytes,
            "max_ops_total": l.max_ops_total,
            "max_ops_per_dispatch": l.max_ops_per_dispatch,
            "max_loop_iterations": l.loop_budget(),
        }
    }));
    resp.headers_mut().insert(header::LOCATION, location);
    Ok(resp)
}

async fn list_sessions(Extension(t): Caller) -> Json<Value> {
    Json(json!({"sessions": t.sessions().iter().map(|s| stats_json(s)).collect::<Vec<_>>()}))
}

async fn session_stats(Extension(t): Caller, Path(sid): Path<String>) -> ApiResult<Json<Value>> {
    Ok(Json(stats_json(&*t.session(&sid)?)))
}

async fn close_session(Extension(t): Caller, Path(sid): Path<String>) -> ApiResult<Json<Value>> {
    let slot = t.remove_session(&sid)?;
    let id = slot.id;
    in_slot(&t, None, move || {
        slot.close();
        Ok(())
    })
    .await?;
    Ok(Json(json!({"closed": id})))
}

async fn upload(
    State(st): St,
    Extension(t): Caller,
    Path(sid): Path<String>,
    uri: Uri,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Response> {
    let slot = t.session(&sid)?;
    let q: TensorQuery = parse::parse_query(uri.query())?;
    let permit = take_slot(&t).await?;
    let (bytes, hold) = read_body(&st, &t, &headers, body).await?;
    let s2 = slot.clone();
    let v = on_gpu(permit, Some(slot), move || {
        let a = parse::decode_upload(&q, &bytes)?;
        drop((bytes, hold));
        let tensor = Tensor::from_bytes_on(&s2.device()?, &a.bytes, &a.shape, a.dtype)?;
        let id = s2.add_tensor(tensor.clone());
        Ok(tensor_json(id, &tensor))
    })
    .await?;
    Ok(created(v))
}

async fn list_tensors(Extension(t): Caller, Path(sid): Path<String>) -> ApiResult<Json<Value>> {
    let slot = t.session(&sid)?;
    Ok(Json(json!({"tensors": slot.tensors().iter().map(|(id, t)| tensor_json(*id, t)).collect::<Vec<_>>()})))
}

async fn download(
    Extension(t): Caller,
    Path((sid, tid)): Path<(String, String)>,
    uri: Uri,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let slot = t.session(&sid)?;
    let tensor = slot.tensor(&tid)?;
    let q: TensorQuery = parse::parse_query(uri.query())?;
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok());
    let format = parse::download_format(&q, accept)?;
    let (dtype, shape) = (tensor.dtype(), tensor.shape().to_vec());
    let bytes = in_slot(&t, Some(slot), move || {
        let raw = tensor.to_bytes()?;
        match format {
            Download::Raw => Ok(raw),
            Download::Npy => {
                npy::encode(tensor.dtype(), tensor.shape(), &raw).map_err(|e| ApiError::new("INTERNAL", e))
            }
        }
    })
    .await?;
    let shape_text = shape.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(",");
    let ctype = match format {
        Download::Raw => "application/octet-stream",
        Download::Npy => "application/x-npy",
    };
    let mut resp = Response::new(Body::from(bytes));
    let h = resp.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(ctype));
    h.insert("x-kiln-dtype", HeaderValue::from_str(&dtype.to_string()).unwrap_or(HeaderValue::from_static("")));
    h.insert("x-kiln-shape", HeaderValue::from_str(&shape_text).unwrap_or(HeaderValue::from_static("")));
    Ok(resp)
}

async fn delete_tensor(Extension(t): Caller, Path((sid, tid)): Path<(String, String)>) -> ApiResult<Json<Value>> {
    let slot = t.session(&sid)?;
    let tensor = slot.remove_tensor(&tid)?;
    drop(tensor);
    Ok(Json(json!({"deleted": tid})))
}

async fn run_op(
    State(st): St,
    Extension(t): Caller,
    Path((sid, op)): Path<(String, String)>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Response> {
    let slot = t.session(&sid)?;
    let permit = take_slot(&t).await?;
    let req: parse::OpRequest = parse::parse_json(&read_body(&st, &t, &headers, body).await?.0)?;
    let inputs =
        req.inputs.iter().map(|i| Ok((i.name.clone(), slot.tensor_by_number(i.id)?))).collect::<ApiResult<Vec<_>>>()?;
    let s2 = slot.clone();
    let v = on_gpu(permit, Some(slot), move || {
        let y = by_name::run(&op, &by_name::OpCall { params: &req.params, inputs: &inputs })?;
        // Ops without inputs (zeros, arange, random_*...) make their result on the process's
        // default device: moved to the session's (a copy through the host, as core's to_device).
        let y = y.to_device(&s2.device()?)?;
        let id = s2.add_tensor(y.clone());
        Ok(tensor_json(id, &y))
    })
    .await?;
    Ok(created(v))
}

async fn compile_kernel(
    State(st): St,
    Extension(t): Caller,
    Path(sid): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Response> {
    let slot = t.session(&sid)?;
    let permit = take_slot(&t).await?;
    let req: parse::KernelRequest = parse::parse_json(&read_body(&st, &t, &headers, body).await?.0)?;
    let s2 = slot.clone();
    // Compiled with the tenant's session current: its loops are bounded and its policy applies.
    let v = on_gpu(permit, Some(slot), move || {
        let k = Kernel::new_on(&s2.device()?, &req.source, &req.entry)?;
        let info = json!({
            "entry": k.entry(),
            "workgroup_size": k.workgroup_size(),
            "storage_bindings": k.storage_bindings().len(),
            "uniform": k.uniform_binding().is_some(),
        });
        let id = s2.add_kernel(k);
        let mut info = info;
        info["id"] = id.into();
        Ok(info)
    })
    .await?;
    Ok(created(v))
}

async fn dispatch_kernel(
    State(st): St,
    Extension(t): Caller,
    Path((sid, kid)): Path<(String, String)>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Json<Value>> {
    let slot = t.session(&sid)?;
    let kernel = slot.kernel(&kid)?;
    let permit = take_slot(&t).await?;
    let req: parse::DispatchRequest = parse::parse_json(&read_body(&st, &t, &headers, body).await?.0)?;
    let tensors = req.tensors.iter().map(|&id| slot.tensor_by_number(id)).collect::<ApiResult<Vec<_>>>()?;
    let uniforms = req.uniforms.as_deref().map(parse::parse_hex).transpose()?;
    let ids = req.tensors.clone();
    on_gpu(permit, Some(slot), move || {
        let refs: Vec<&Tensor> = tensors.iter().collect();
        kernel.dispatch(&refs, uniforms.as_deref(), req.workgroups)?;
        // A kernel stopped by its loop budget leaves its outputs invalid: say so now, for this
        // dispatch, rather than at some later read.
        for t in &tensors {
            t.check()?;
        }
        Ok(())
    })
    .await?;
    Ok(Json(json!({"dispatched": kid, "tensors": ids})))
}
