//! The peer against a recording outbox: what it sends, and what it makes
//! of every kind of message a server can send back.

use super::*;

/// Records what the peer sends.
struct Recorder(mpsc::UnboundedSender<Value>);

impl Outbox for Recorder {
    fn send(&self, message: Value) -> BoxFuture<'_, Result<(), String>> {
        let _ = self.0.send(message);
        Box::pin(std::future::ready(Ok(())))
    }
}

fn peer() -> (
    Peer,
    Inbox,
    mpsc::UnboundedReceiver<Value>,
    mpsc::UnboundedReceiver<Notification>,
) {
    let (inbox, notifications) = Inbox::new();
    let (tx, sent) = mpsc::unbounded_channel();
    (
        inbox.peer(Arc::new(Recorder(tx))),
        inbox,
        sent,
        notifications,
    )
}

/// Starts `request` and returns it with the message it sent.
async fn started<F: Future + Send + 'static>(
    request: F,
    sent: &mut mpsc::UnboundedReceiver<Value>,
) -> (tokio::task::JoinHandle<F::Output>, Value)
where
    F::Output: Send,
{
    let task = tokio::spawn(request);
    let message = sent.recv().await.unwrap();
    (task, message)
}

#[tokio::test]
async fn a_result_reaches_its_request() {
    let (peer, inbox, mut sent, _) = peer();
    let call = {
        let peer = peer.clone();
        async move { peer.request::<Value>("tools/list", json!({})).await }
    };
    let (task, message) = started(call, &mut sent).await;
    assert_eq!(message["jsonrpc"], "2.0");
    assert_eq!(message["method"], "tools/list");
    let id = &message["id"];
    let reply = json!({"jsonrpc": "2.0", "id": id, "result": {"tools": []}});
    assert_eq!(inbox.receive(&reply.to_string()), Received::Handled);
    assert_eq!(task.await.unwrap().unwrap(), json!({"tools": []}));
    assert_eq!(peer.pending_count(), 0);
}

#[tokio::test]
async fn an_error_reply_is_a_server_error() {
    let (peer, inbox, mut sent, _) = peer();
    let call = {
        let peer = peer.clone();
        async move { peer.request::<Value>("tools/call", json!({})).await }
    };
    let (task, message) = started(call, &mut sent).await;
    let reply = json!({"jsonrpc": "2.0", "id": message["id"],
        "error": {"code": -32602, "message": "unknown tool: nope"}});
    inbox.receive(&reply.to_string());
    let err = task.await.unwrap().unwrap_err();
    assert!(
        matches!(&err, RequestError::Server { code: -32602, message } if message == "unknown tool: nope"),
        "{err:?}"
    );
}

#[tokio::test]
async fn unknown_ids_and_lines_that_are_not_json_are_ignored_with_why() {
    let (peer, inbox, mut sent, _) = peer();
    let call = {
        let peer = peer.clone();
        async move { peer.request::<Value>("resources/read", json!({})).await }
    };
    let (task, message) = started(call, &mut sent).await;
    let Received::Ignored(why) = inbox.receive("Server listening on stdio") else {
        panic!("a log line was taken as a message");
    };
    assert!(
        why.contains("not JSON") && why.contains("Server listening"),
        "{why}"
    );
    let stray = json!({"jsonrpc": "2.0", "id": 999, "result": {}});
    let Received::Ignored(why) = inbox.receive(&stray.to_string()) else {
        panic!("a response to nobody was taken");
    };
    assert!(why.contains("id 999"), "{why}");
    let Received::Ignored(why) = inbox.receive("[1, 2]") else {
        panic!("an array was taken");
    };
    assert!(why.contains("not a JSON-RPC message"), "{why}");
    // The request still waits for its own answer, and gets it.
    assert_eq!(peer.pending_count(), 1);
    let reply = json!({"jsonrpc": "2.0", "id": message["id"], "result": {"contents": []}});
    inbox.receive(&reply.to_string());
    assert_eq!(task.await.unwrap().unwrap(), json!({"contents": []}));
}

#[tokio::test]
async fn server_requests_are_answered_and_notifications_passed_on() {
    let (_peer, inbox, _sent, mut notifications) = peer();
    let ping = json!({"jsonrpc": "2.0", "id": "p1", "method": "ping"});
    assert_eq!(
        inbox.receive(&ping.to_string()),
        Received::Reply(json!({"jsonrpc": "2.0", "id": "p1", "result": {}}))
    );
    let sampling =
        json!({"jsonrpc": "2.0", "id": 7, "method": "sampling/createMessage", "params": {}});
    let Received::Reply(reply) = inbox.receive(&sampling.to_string()) else {
        panic!("no answer to a server request");
    };
    assert_eq!(reply["id"], 7);
    assert_eq!(reply["error"]["code"], METHOD_NOT_FOUND);
    assert!(reply.get("result").is_none(), "{reply}");
    let changed = json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"});
    assert_eq!(inbox.receive(&changed.to_string()), Received::Handled);
    let notification = notifications.recv().await.unwrap();
    assert_eq!(notification.method, "notifications/tools/list_changed");
    assert_eq!(notification.params, Value::Null);
}

#[tokio::test]
async fn concurrent_requests_get_their_own_answers_in_any_order() {
    let (peer, inbox, mut sent, _) = peer();
    let mut tasks = Vec::new();
    let mut ids = Vec::new();
    for n in 0..5 {
        let peer = peer.clone();
        let call = async move { peer.request::<Value>("tools/call", json!({"n": n})).await };
        let (task, message) = started(call, &mut sent).await;
        assert_eq!(message["params"]["n"], n);
        tasks.push(task);
        ids.push(message["id"].clone());
    }
    for (n, id) in ids.iter().enumerate().rev() {
        let reply = json!({"jsonrpc": "2.0", "id": id, "result": {"n": n}});
        inbox.receive(&reply.to_string());
    }
    for (n, task) in tasks.into_iter().enumerate() {
        assert_eq!(task.await.unwrap().unwrap(), json!({"n": n}));
    }
}

#[tokio::test]
async fn a_dropped_request_leaves_no_entry() {
    let (peer, _inbox, mut sent, _) = peer();
    let call = {
        let peer = peer.clone();
        async move { peer.request::<Value>("tools/call", json!({})).await }
    };
    let (task, _) = started(call, &mut sent).await;
    assert_eq!(peer.pending_count(), 1);
    task.abort();
    let _ = task.await;
    assert_eq!(peer.pending_count(), 0);
}

#[tokio::test]
async fn closing_fails_waiting_and_later_requests_with_the_reason() {
    let (peer, inbox, mut sent, _) = peer();
    let call = {
        let peer = peer.clone();
        async move { peer.request::<Value>("tools/call", json!({})).await }
    };
    let (task, _) = started(call, &mut sent).await;
    inbox.close("the server closed its stdout");
    let err = task.await.unwrap().unwrap_err();
    assert!(
        matches!(&err, RequestError::Closed(why) if why == "the server closed its stdout"),
        "{err:?}"
    );
    let err = peer.request::<Value>("ping", json!({})).await.unwrap_err();
    assert!(
        err.to_string().contains("the server closed its stdout"),
        "{err}"
    );
    assert_eq!(peer.pending_count(), 0);
}

#[tokio::test]
async fn a_result_of_the_wrong_shape_names_the_method() {
    let (peer, inbox, mut sent, _) = peer();
    let call = {
        let peer = peer.clone();
        async move {
            peer.request::<crate::model::ListToolsResult>("tools/list", json!({}))
                .await
        }
    };
    let (task, message) = started(call, &mut sent).await;
    let reply = json!({"jsonrpc": "2.0", "id": message["id"], "result": {"tools": "none"}});
    inbox.receive(&reply.to_string());
    let err = task.await.unwrap().unwrap_err().to_string();
    assert!(
        err.contains("its answer to `tools/list` could not be read"),
        "{err}"
    );
}
