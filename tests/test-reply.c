/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The reply/close rules (daemon/core/reply.h), first on a fake sink (reply.c alone), then on a
 * real connection over a socketpair (connection.c with its event loop, no rest of the daemon):
 * an answer after the peer went is dropped and counted; a send over the cap does not run the
 * close hooks synchronously but from the loop; hooks removed before the close never run;
 * writable hooks fire when the backlog drains; references balance. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <systemd/sd-event.h>
#include <unistd.h>

#include "connection.h"
#include "context.h"
#include "manager.h"
#include "reply.h"
#include "tap.h"
#include "util.h"

/* ---- A fake sink --------------------------------------------------------------------------- */

typedef struct FakeSink {
        ReplySink sink;         /* first: the ops get it back by a cast */
        unsigned n_ref;
        unsigned n_sent;
        size_t backlog;
        bool input_ended;
        char last[512];
} FakeSink;

static void fake_send(ReplySink *sink, json_object *msg) {
        FakeSink *f = (FakeSink *) sink;
        f->n_sent++;
        snprintf(f->last, sizeof(f->last), "%s", json_object_to_json_string_ext(msg, JSON_C_TO_STRING_PLAIN));
        json_object_put(msg);
}

static size_t fake_backlog(const ReplySink *sink) {
        return ((const FakeSink *) sink)->backlog;
}

static bool fake_input_ended(const ReplySink *sink) {
        return ((const FakeSink *) sink)->input_ended;
}

static void fake_ref(ReplySink *sink) {
        ((FakeSink *) sink)->n_ref++;
}

static void fake_unref(ReplySink *sink) {
        ((FakeSink *) sink)->n_ref--;
}

static const ReplySinkOps fake_ops = {
        .send = fake_send,
        .backlog = fake_backlog,
        .input_ended = fake_input_ended,
        .ref = fake_ref,
        .unref = fake_unref,
};

/* A hook owner: counts its calls; may remove another hook, or unref a reply, when it runs. */
typedef struct Counter {
        Hook hook;
        unsigned calls;
        Hook *remove_other;
        Reply **unref_when_called;
} Counter;

static void count_hook(Hook *h, void *userdata) {
        Counter *c = userdata;
        c->calls++;
        if (c->remove_other)
                hook_remove(c->remove_other);
        if (c->unref_when_called)
                *c->unref_when_called = reply_unref(*c->unref_when_called);
}

static void fake_init(FakeSink *f) {
        ReplyPeer peer = { .cred = { .pid = 42, .uid = 1000, .gid = 1000 }, .admin = false };
        *f = (FakeSink) {};
        reply_sink_init(&f->sink, &fake_ops, &peer);
}

static void test_fake_answers(void) {
        FakeSink f;
        Reply *r = NULL;
        ProtoError err;
        json_object *id = json_object_new_int(7), *extra = json_object_new_object();

        fake_init(&f);
        ok(reply_new(&f.sink, id, &r) == 0 && r, "reply_new");
        is_int(f.n_ref, 1, "a reply holds one reference on its sink");
        ok(reply_peer(r)->cred.uid == 1000 && reply_peer(r)->cred.pid == 42 && !reply_peer(r)->admin,
           "reply_peer is the sink's peer");

        json_object_object_add(extra, "run_id", json_object_new_string("run-1"));
        reply_ok(r, extra);
        is_int(f.n_sent, 1, "reply_ok sends once");
        is_str(f.last, "{\"id\":7,\"ok\":true,\"run_id\":\"run-1\"}", "reply_ok: id, ok, then extra's members");

        reply_event(r, reply_event_new(r, "stdout"));
        is_str(f.last, "{\"id\":7,\"event\":\"stdout\"}", "reply_event carries the request's id");

        int64_t got_id = 0;
        ok(reply_id_int(r, &got_id) && got_id == 7, "reply_id_int: an integer id is given back");
        /* A sink without send_line gets a formatted line as the JSON it says. */
        static const char line[] = "{\"id\":7,\"event\":\"data\",\"seq\":0,\"offset\":0,\"data\":\"aGk=\"}\n";
        reply_send_line(r, line, sizeof(line) - 1);
        is_int(f.n_sent, 3, "reply_send_line reaches a sink without send_line through send");
        is_str(f.last, "{\"id\":7,\"event\":\"data\",\"seq\":0,\"offset\":0,\"data\":\"aGk=\"}",
               "... as the JSON of the line");

        proto_error_set(&err, SBX_E_CONFLICT, "sandbox", "gone");
        reply_error(r, &err);
        ok(strstr(f.last, "\"id\":7,\"ok\":false,\"error\":") && strstr(f.last, "\"conflict\""),
           "reply_error: id, ok false, the error (%s)", f.last);

        f.backlog = 1234;
        is_int((long long) reply_backlog(r), 1234, "reply_backlog asks the sink");
        f.input_ended = true;
        ok(reply_input_ended(r), "reply_input_ended asks the sink");

        reply_account(r, 1, 500);
        reply_account(r, 0, -200);
        ok(f.sink.n_runs == 1 && f.sink.run_reserved == 300 && reply_runs(r) == 1, "reply_account counts on the sink");
        reply_account(r, -1, -300);
        ok(f.sink.n_runs == 0 && f.sink.run_reserved == 0, "and takes it back");

        /* The peer goes: every answer from now on is dropped, and counted. */
        reply_sink_gone(&f.sink);
        ok(reply_gone(r), "reply_gone once the sink is gone");
        is_int((long long) reply_backlog(r), 0, "a gone sink has no backlog");
        reply_ok(r, json_object_new_object());
        reply_error(r, &err);
        reply_event(r, reply_event_new(r, "stdout"));
        reply_send_line(r, line, sizeof(line) - 1);
        is_int(f.n_sent, 4, "nothing reaches a gone sink");
        is_uint64(f.sink.n_dropped, 4, "the four answers after it went are counted as dropped");

        Reply *r2 = reply_ref(r);
        ok(r2 == r && f.n_ref == 1, "reply_ref takes no new sink reference");
        reply_unref(r2);
        is_int(f.n_ref, 1, "the sink is held until the last reference goes");
        ok(reply_unref(r) == NULL, "reply_unref returns NULL");
        is_int(f.n_ref, 0, "references balance: none left on the sink");
        json_object_put(id);

        fake_init(&f);
        id = json_object_new_string("seven");
        ok(reply_new(&f.sink, id, &r) == 0 && !reply_id_int(r, &got_id), "reply_id_int: a string id is no integer");
        reply_unref(r);
        json_object_put(id);
        ok(reply_new(&f.sink, NULL, &r) == 0 && !reply_id_int(r, &got_id), "reply_id_int: nor is a missing one");
        reply_unref(r);
}

static void test_fake_hooks(void) {
        FakeSink f;
        Reply *r = NULL, *held = NULL;
        Counter a = {}, b = {}, removed = {}, w1 = {}, w2 = {}, late = {};
        unsigned w1_calls;

        fake_init(&f);
        (void) reply_new(&f.sink, NULL, &r);
        hook_init(&a.hook, count_hook, &a);
        hook_init(&b.hook, count_hook, &b);
        hook_init(&removed.hook, count_hook, &removed);
        hook_init(&w1.hook, count_hook, &w1);
        hook_init(&w2.hook, count_hook, &w2);
        hook_init(&late.hook, count_hook, &late);

        reply_on_close(r, &a.hook);
        reply_on_close(r, &b.hook);
        reply_on_close(r, &removed.hook);
        ok(hook_linked(&removed.hook), "a close hook is linked");
        hook_remove(&removed.hook);
        ok(!hook_linked(&removed.hook), "hook_remove unlinks it");
        hook_remove(&removed.hook); /* twice: nothing */

        reply_on_writable(r, &w1.hook);
        reply_on_writable(r, &w2.hook);
        reply_sink_writable(&f.sink);
        ok(w1.calls == 1 && w2.calls == 1, "writable hooks run (%u, %u)", w1.calls, w2.calls);
        ok(hook_linked(&w1.hook) && hook_linked(&w2.hook), "and stay linked");
        ok(a.calls == 0 && b.calls == 0, "close hooks do not run on writable");

        /* One writable hook removes the other while they run: the other does not run this time. */
        w1.remove_other = &w2.hook;
        w2.remove_other = &w1.hook;
        reply_sink_writable(&f.sink);
        ok(w1.calls + w2.calls == 3 && hook_linked(&w1.hook) != hook_linked(&w2.hook),
           "a writable hook removed by another does not run (%u, %u)", w1.calls, w2.calls);
        hook_remove(&w1.hook);
        hook_remove(&w2.hook);
        reply_sink_writable(&f.sink);
        is_int(w1.calls + w2.calls, 3, "removed writable hooks never run");

        /* Close: each runs once, unlinked; of two that remove each other only the first to run
         * runs; the last reference may go from inside a hook. */
        reply_on_close(r, &late.hook);
        a.remove_other = &b.hook;
        b.remove_other = &a.hook;
        held = reply_ref(r);
        late.unref_when_called = &held;
        reply_on_writable(r, &w1.hook);
        w1.remove_other = NULL;
        reply_sink_writable(&f.sink);
        w1_calls = w1.calls;
        reply_sink_gone(&f.sink);
        reply_sink_writable(&f.sink);
        is_int(w1.calls, w1_calls, "no writable hook runs once the sink is gone");
        is_int(a.calls + b.calls + late.calls, 0, "going does not run the close hooks by itself");
        reply_sink_closed(&f.sink);
        is_int(a.calls + b.calls, 1, "of two close hooks that remove each other, one runs (%u, %u)", a.calls, b.calls);
        is_int(late.calls, 1, "every other close hook runs once");
        ok(!hook_linked(&a.hook) && !hook_linked(&b.hook) && !hook_linked(&late.hook), "and is unlinked");
        is_int(removed.calls, 0, "a close hook removed before the close never runs");
        ok(held == NULL && f.n_ref == 1, "a hook dropped a reference from inside the close");
        reply_on_close(r, &removed.hook);
        hook_remove(&removed.hook);
        reply_sink_closed(&f.sink);
        ok(a.calls + b.calls == 1 && late.calls == 1 && removed.calls == 0, "a second close runs nothing again");
        hook_remove(&w1.hook);
        reply_unref(r);
        is_int(f.n_ref, 0, "references balance after hooks and close");
}

/* ---- A real connection ----------------------------------------------------------------------- */

typedef struct Server {
        Context ctx;
        Manager m;
        unsigned dispatched, closed_calls, routed;
        Reply *last;             /* the last request's reply, held */
        Counter on_close, on_writable;
        bool close_hook_ran_in_send; /* set by a close hook that runs while a send is on the stack */
} Server;

static bool in_send;

static void close_hook(Hook *h, void *userdata) {
        Server *s = userdata;
        s->on_close.calls++;
        if (in_send)
                s->close_hook_ran_in_send = true;
}

static void writable_hook(Hook *h, void *userdata) {
        Server *s = userdata;
        s->on_writable.calls++;
}

static void dispatch(Reply *reply, const char *op, json_object *req, int *fds, size_t n_fds, void *userdata) {
        Server *s = userdata;
        s->dispatched++;
        reply_unref(s->last);
        s->last = reply_ref(reply);
        hook_init(&s->on_close.hook, close_hook, s);
        hook_init(&s->on_writable.hook, writable_hook, s);
        reply_on_close(reply, &s->on_close.hook);
        reply_on_writable(reply, &s->on_writable.hook);
}

static void closed(Connection *c, void *userdata) {
        ((Server *) userdata)->closed_calls++;
}

/* Takes the lines that start with {"routed": a stand-in for ops_route()'s file.chunk lines. */
static bool route(ReplySink *sink, const char *line, size_t len, void *userdata) {
        static const char mark[] = "{\"routed\"";
        if (len < sizeof(mark) - 1 || memcmp(line, mark, sizeof(mark) - 1) != 0)
                return false;
        ((Server *) userdata)->routed++;
        return true;
}

static const ConnectionHooks hooks = { .dispatch = dispatch, .route = route, .closed = closed };

static void server_init(Server *s) {
        *s = (Server) {};
        s->m.ctx = &s->ctx;
        (void) sd_event_new(&s->ctx.event);
        s->ctx.config.max_line_bytes = 65536;
        s->ctx.config.max_connection_output = 256u << 10;
        s->ctx.config.max_buffered_per_uid = 1u << 30;
        s->ctx.config.max_connections_per_uid = 16;
        s->ctx.config.request_timeout_usec = 10 * USEC_PER_SEC;
        s->m.conns = (ConnectionSet) { .event = s->ctx.event, .config = &s->ctx.config, .hooks = &hooks, .hooks_userdata = s };
}

static void server_done(Server *s) {
        s->last = reply_unref(s->last);
        while (s->m.conns.head)
                connection_close_now(s->m.conns.head);
        sd_event_unref(s->ctx.event);
}

/* Runs the loop until cond or a bounded number of rounds (a hang is a failure, not a wait). */
#define RUN_UNTIL(s, cond)                                                  \
        do {                                                                \
                for (int _i = 0; _i < 200 && !(cond); _i++)                 \
                        (void) sd_event_run((s)->ctx.event, 10 * 1000);       \
        } while (0)

static Connection *connect_pair(Server *s, int *ret_client) {
        int sv[2];
        struct ucred peer = { .pid = getpid(), .uid = 0, .gid = 0 };
        Connection *c = NULL;

        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) < 0)
                return NULL;
        if (connection_new(&s->m.conns, sv[0], &peer, &c) < 0) {
                close(sv[0]);
                close(sv[1]);
                return NULL;
        }
        *ret_client = sv[1];
        return c;
}

static json_object *big_event(Reply *r, size_t n) {
        json_object *ev = reply_event_new(r, "stdout");
        char *buf = malloc(n + 1);
        memset(buf, 'x', n);
        buf[n] = 0;
        json_object_object_add(ev, "data", json_object_new_string(buf));
        free(buf);
        return ev;
}

static size_t drain(int fd) {
        char buf[65536];
        size_t total = 0;
        ssize_t n;
        while ((n = read(fd, buf, sizeof(buf))) > 0)
                total += (size_t) n;
        return total;
}

static void test_connection_close_deferred(void) {
        Server s;
        int client = -1;
        Connection *c;
        const char req[] = "{\"id\":1,\"op\":\"x\"}\n";
        uint64_t dropped;

        server_init(&s);
        c = connect_pair(&s, &client);
        if (!ok(c != NULL, "a connection on a socketpair"))
                return;
        ok(write(client, req, sizeof(req) - 1) == (ssize_t) sizeof(req) - 1, "a request written");
        RUN_UNTIL(&s, s.dispatched == 1);
        if (!is_int(s.dispatched, 1, "the dispatch hook got it"))
                return;
        is_int(c->n_ref, 2, "the manager's reference and the held reply's");
        is_int(s.m.conns.n, 1, "one connection counted");

        /* Over max_connection_output in one event: the connection dies, its close waits. */
        in_send = true;
        reply_event(s.last, big_event(s.last, 1u << 20));
        in_send = false;
        ok(reply_gone(s.last) && c->dead, "a send over the cap marks the connection dead");
        is_int(s.on_close.calls, 0, "its close hook did not run inside the send");
        is_int(s.closed_calls, 0, "nor did the closed hook");
        ok(!s.close_hook_ran_in_send, "no close hook ran while the send was on the stack");
        is_int(s.m.conns.n, 0, "a dead connection is no longer counted");

        dropped = c->sink.n_dropped;
        reply_ok(s.last, NULL);
        is_uint64(c->sink.n_dropped, dropped + 1, "an answer after the peer went is dropped and counted");

        RUN_UNTIL(&s, s.on_close.calls > 0);
        is_int(s.on_close.calls, 1, "the close hook ran once, from the loop");
        is_int(s.closed_calls, 1, "then the closed hook, once");
        ok(s.m.conns.head == NULL, "the connection left the manager's list");
        is_int(c->n_ref, 1, "only the held reply keeps it now");
        is_int(s.on_writable.calls, 0, "no writable hook ran for a dead connection");
        (void) sd_event_run(s.ctx.event, 0);
        is_int(s.on_close.calls, 1, "the close hooks never run twice");
        close(client);
        server_done(&s); /* drops the last reply, and with it the connection (ASan: no leak) */
}

static void test_connection_hook_removed(void) {
        Server s;
        int client = -1;
        Connection *c;
        const char req[] = "{\"id\":\"a\",\"op\":\"x\"}\n";

        server_init(&s);
        c = connect_pair(&s, &client);
        if (!ok(c != NULL, "a second connection"))
                return;
        (void) write(client, req, sizeof(req) - 1);
        RUN_UNTIL(&s, s.dispatched == 1);
        hook_remove(&s.on_close.hook);
        close(client); /* the peer hangs up */
        RUN_UNTIL(&s, s.closed_calls > 0);
        is_int(s.closed_calls, 1, "the peer's hang-up closes the connection");
        is_int(s.on_close.calls, 0, "a close hook removed before the close never runs");
        server_done(&s);
}

/* The route hook sees each line before it is parsed; what it takes is never dispatched (nor
 * parsed: the routed line here is no JSON). */
static void test_connection_route(void) {
        Server s;
        int client = -1;
        Connection *c;
        const char lines[] = "{\"routed\" not json at all\n{\"id\":1,\"op\":\"x\"}\n{\"routed\":2}\n";

        server_init(&s);
        c = connect_pair(&s, &client);
        if (!ok(c != NULL, "a connection with a route hook"))
                return;
        (void) write(client, lines, sizeof(lines) - 1);
        RUN_UNTIL(&s, s.dispatched == 1 && s.routed == 2);
        is_int(s.routed, 2, "the route hook took its two lines");
        is_int(s.dispatched, 1, "the other line was dispatched");
        char buf[256];
        (void) sd_event_run(s.ctx.event, 10 * 1000);
        ok(connection_backlog(c) == 0 && recv(client, buf, sizeof(buf), MSG_DONTWAIT) < 0 && errno == EAGAIN,
           "no error reply for the routed line that is no JSON (nothing came back at all)");
        close(client);
        RUN_UNTIL(&s, s.closed_calls > 0);
        server_done(&s);
}

static void test_connection_writable(void) {
        Server s;
        int client = -1, small = 4096;
        Connection *c;
        const char req[] = "{\"id\":2,\"op\":\"x\"}\n";
        size_t got;

        server_init(&s);
        c = connect_pair(&s, &client);
        if (!ok(c != NULL, "a third connection"))
                return;
        (void) setsockopt(c->fd, SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
        (void) setsockopt(client, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
        (void) write(client, req, sizeof(req) - 1);
        RUN_UNTIL(&s, s.dispatched == 1);

        reply_event(s.last, big_event(s.last, 128u << 10));
        ok(!reply_gone(s.last) && reply_backlog(s.last) > 0, "a reply the client has not read yet is backlog (%zu)",
           reply_backlog(s.last));
        (void) sd_event_run(s.ctx.event, 0);
        is_int(s.on_writable.calls, 0, "no writable hook while the backlog stays");

        got = 0;
        for (int i = 0; i < 200 && reply_backlog(s.last) > 0; i++) {
                got += drain(client);
                (void) sd_event_run(s.ctx.event, 10 * 1000);
        }
        got += drain(client);
        is_int((long long) reply_backlog(s.last), 0, "the backlog drained as the client read (%zu bytes)", got);
        ok(s.on_writable.calls >= 1, "the writable hook ran once there was room (%u)", s.on_writable.calls);
        ok(!c->dead && s.on_close.calls == 0, "and the connection lives on");

        hook_remove(&s.on_writable.hook);
        {
                unsigned before = s.on_writable.calls;
                reply_event(s.last, big_event(s.last, 128u << 10));
                for (int i = 0; i < 50 && reply_backlog(s.last) > 0; i++) {
                        drain(client);
                        (void) sd_event_run(s.ctx.event, 10 * 1000);
                }
                is_int(s.on_writable.calls, before, "a removed writable hook does not run again");
        }
        close(client);
        RUN_UNTIL(&s, s.closed_calls > 0);
        is_int(s.on_close.calls, 1, "the close hook runs when the peer goes");
        server_done(&s);
}

/* ---- Inlets: requests that take chunk lines after them ------------------------------------ */

static int inlet_take(Inlet *in, const FileChunk *c, bool from_scan, void *userdata) {
        (*(unsigned *) userdata)++;
        return 0;
}

static void inlet_refuse(Inlet *in, const ProtoError *err, void *userdata) {
}

static void test_fake_inlets(void) {
        FakeSink f;
        Reply *r[20] = {}, *dup = NULL;
        Inlet in[20] = {}, in_dup = {};
        unsigned taken = 0;
        bool ended = true;
        json_object *id;

        fake_init(&f);
        for (int i = 0; i < 20; i++) {
                id = json_object_new_int(i);
                (void) reply_new(&f.sink, id, &r[i]);
                json_object_put(id);
        }
        ok(reply_inlet_add(r[3], &in[3], inlet_take, inlet_refuse, &taken) == 0, "an inlet is linked under its reply's id");
        ok(reply_sink_inlet_int(&f.sink, 3, &ended) == &in[3] && !ended, "the fast path finds it by an integer id");
        id = json_object_new_int(3);
        ok(reply_sink_inlet(&f.sink, id, &ended) == &in[3] && reply_peer_inlet(r[5], id, &ended) == &in[3],
           "the general path by the JSON id, also through another reply of the same sink");
        json_object_put(id);
        id = json_object_new_string("3");
        ok(reply_sink_inlet(&f.sink, id, &ended) == NULL && !ended, "the string \"3\" is another id");
        json_object_put(id);
        id = json_object_new_int(3);
        (void) reply_new(&f.sink, id, &dup);
        json_object_put(id);
        is_int(reply_inlet_add(dup, &in_dup, inlet_take, inlet_refuse, &taken), -EEXIST,
               "a second inlet with the id of a linked one: -EEXIST");
        ok(reply_sink_inlet_int(&f.sink, 4, &ended) == NULL && !ended, "an id with no inlet: none, not ended");
        inlet_remove(&in[3]);
        ok(reply_sink_inlet_int(&f.sink, 3, &ended) == NULL && ended, "a removed inlet's id is an ended one");
        inlet_remove(&in[3]);
        ok(!in[3].linked, "removing it twice is nothing");
        /* 16 more end: the first ended id is forgotten, the last 16 are kept. */
        for (int i = 4; i < 20; i++) {
                (void) reply_inlet_add(r[i], &in[i], inlet_take, inlet_refuse, &taken);
                inlet_remove(&in[i]);
        }
        ok(reply_sink_inlet_int(&f.sink, 3, &ended) == NULL && !ended, "after 16 more ended, the 17th last is forgotten");
        ok(reply_sink_inlet_int(&f.sink, 4, &ended) == NULL && ended, "the 16 last are remembered");
        ok(reply_inlet_add(dup, &in_dup, inlet_take, inlet_refuse, &taken) == 0,
           "an ended id may be used again by a new transfer");
        ok(reply_sink_inlet_int(&f.sink, 3, &ended) == &in_dup, "... which is found first");
        inlet_remove(&in_dup);
        reply_sink_closed(&f.sink);
        ok(f.sink.ended[0] == NULL && f.sink.ended[15] == NULL, "the close releases the ended ids");
        for (int i = 0; i < 20; i++)
                reply_unref(r[i]);
        reply_unref(dup);
        is_int(f.n_ref, 0, "references balance");
}

int main(void) {
        test_fake_answers();
        test_fake_hooks();
        test_fake_inlets();
        test_connection_close_deferred();
        test_connection_hook_removed();
        test_connection_route();
        test_connection_writable();
        return done_testing();
}
