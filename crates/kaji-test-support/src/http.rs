//! The scripted model server's HTTP/1.1 layer, on hyper alone: accepting
//! connections on the loopback listener, reading each request whole, and
//! the one body type responses use (a full buffer or a stream of frames).
//!
//! It decides nothing about replies (that is `server`'s job) and adds no
//! router: every request goes to the one handler. It never listens
//! anywhere but the listener it is given.

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;

use bytes::Bytes;
use futures::{Stream, TryStreamExt};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper_util::rt::TokioIo;

/// A response body: known in full, or streamed frame by frame.
pub(crate) type Body = UnsyncBoxBody<Bytes, std::io::Error>;

/// A response of the scripted server.
pub(crate) type Response = hyper::Response<Body>;

/// A body of these bytes, its length known.
pub(crate) fn full(bytes: impl Into<Bytes>) -> Body {
    Full::new(bytes.into())
        .map_err(|never: Infallible| match never {})
        .boxed_unsync()
}

/// A body sent as `frames` yields them; an error ends the connection
/// mid-body (how a dropped stream looks to the client).
pub(crate) fn streamed<S>(frames: S) -> Body
where
    S: Stream<Item = std::io::Result<Bytes>> + Send + 'static,
{
    StreamBody::new(frames.map_ok(Frame::data)).boxed_unsync()
}

/// What the handler is given: the request line, headers and whole body.
pub(crate) struct Request {
    pub method: hyper::Method,
    pub uri: hyper::Uri,
    pub headers: hyper::HeaderMap,
    pub body: Bytes,
}

/// Serves every connection `listener` accepts with `handle`, until the
/// returned task is aborted. A body that cannot be read is answered 400
/// without reaching the handler.
pub(crate) async fn serve<S, H, F>(listener: tokio::net::TcpListener, state: Arc<S>, handle: H)
where
    S: Send + Sync + 'static,
    H: Fn(Arc<S>, Request) -> F + Copy + Send + Sync + 'static,
    F: Future<Output = Response> + Send + 'static,
{
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(e) => {
                // Out of descriptors, or a connection reset before it was
                // accepted: the listener itself is fine, so keep going
                // after a pause that keeps a full table from spinning.
                eprintln!("scripted model server: accept failed: {e}");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        let state = Arc::clone(&state);
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req: hyper::Request<Incoming>| {
                let state = Arc::clone(&state);
                async move { Ok::<_, Infallible>(answer(state, req, handle).await) }
            });
            // A client that goes away mid-request is its own business.
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

/// Reads the request's body and hands the request to `handle`.
async fn answer<S, H, F>(state: Arc<S>, req: hyper::Request<Incoming>, handle: H) -> Response
where
    H: Fn(Arc<S>, Request) -> F,
    F: Future<Output = Response>,
{
    let (parts, body) = req.into_parts();
    match body.collect().await {
        Ok(body) => {
            let request = Request {
                method: parts.method,
                uri: parts.uri,
                headers: parts.headers,
                body: body.to_bytes(),
            };
            handle(state, request).await
        }
        Err(e) => {
            let mut response = hyper::Response::new(full(format!(
                "the scripted model server could not read the request body: {e}"
            )));
            *response.status_mut() = hyper::StatusCode::BAD_REQUEST;
            response
        }
    }
}
