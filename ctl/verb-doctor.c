/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sandboxctl doctor: can sandboxes run on this host, with every limit enforced? The host checks
 * live in doctor-checks.c; here are the ones about sandboxd itself (its socket, its delegated
 * cgroup, what it says it enforces), the verdict and the report. */
#include <errno.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "doctor.h"
#include "sandboxctl.h"

static int verb_doctor_run(int argc, char *argv[]);

const Verb verb_doctor = {
        .name = "doctor",
        .args = "[--state-dir DIR]",
        .summary = "Check whether this host can run sandboxes with every limit enforced",
        .help = "Checks cgroup v2 and its controllers, the delegation of sandboxd's cgroup, user\n"
                "namespaces, the kernel features sandboxd uses, its socket and free disk space,\n"
                "and says how to fix what is missing. Works without the daemon; checks more\n"
                "when it answers.\n\n"
                "Options:\n"
                "     --state-dir DIR     sandboxd's state directory, for the disk check\n"
                "                         (default: the daemon's, else " LOCALSTATEDIR "/lib/sandboxd)\n\n"
                "Exit status: 0 when sandboxes can run with every limit enforced, 1 when only\n"
                "best-effort (some limits cannot be enforced), 2 when they cannot run at all.\n",
        .failure_status = 2,
        .run = verb_doctor_run,
};

/* ---- The socket and the daemon ----------------------------------------------------------- */

/* Whether PID 1 is systemd (sd_booted()'s test): then sandboxd runs from its units, else from a
 * command line (scripts/quickstart.sh), and the fixes below say which. */
static bool systemd_booted(void) {
        return access("/run/systemd/system/", F_OK) >= 0;
}

static bool in_groups(gid_t gid) {
        gid_t groups[NGROUPS_MAX];
        int n = getgroups(ELEMENTSOF(groups), groups);

        if (getegid() == gid)
                return true;
        for (int i = 0; i < n; i++)
                if (groups[i] == gid)
                        return true;
        return false;
}

/* Whether /etc/group lists the user in gr: then only this login session lacks the group. */
static bool listed_in_group(const struct group *gr) {
        struct passwd *pw = getpwuid(geteuid());

        for (char **m = gr ? gr->gr_mem : NULL; pw && m && *m; m++)
                if (strcmp(*m, pw->pw_name) == 0)
                        return true;
        return false;
}

static bool may_connect(const struct stat *st) {
        if (geteuid() == 0)
                return true;
        if (st->st_uid == geteuid())
                return st->st_mode & S_IWUSR;
        if (in_groups(st->st_gid))
                return st->st_mode & S_IWGRP;
        return st->st_mode & S_IWOTH;
}

static void fix_socket_access(Check *c, const struct stat *st) {
        struct group *gr = getgrgid(st->st_gid);
        struct passwd *pw = getpwuid(geteuid());
        const char *user = pw ? pw->pw_name : "$USER";

        if (!gr || !(st->st_mode & S_IWGRP))
                check_fix(c, "only root may use this socket: run sandboxctl as root, or give the socket a group "
                             "(SocketGroup= and SocketMode=0660 in sandboxd.socket)");
        else if (listed_in_group(gr))
                check_fix(c, "%s is in the '%s' group, but this login session is not yet: log in again (or run "
                             "'newgrp %s')", user, gr->gr_name, gr->gr_name);
        else
                check_fix(c, "add your user to the '%s' group: sudo usermod -aG %s %s, then log in again", gr->gr_name,
                          gr->gr_name, user);
}

static const char *owner_names(char *buf, size_t len, const struct stat *st) {
        struct passwd *pw = getpwuid(st->st_uid);
        struct group *gr = getgrgid(st->st_gid);
        char u[16], g[16];

        snprintf(u, sizeof(u), "%u", (unsigned) st->st_uid);
        snprintf(g, sizeof(g), "%u", (unsigned) st->st_gid);
        snprintf(buf, len, "%s:%s", pw ? pw->pw_name : u, gr ? gr->gr_name : g);
        return buf;
}

/* 0 when the caller may connect. */
static int check_socket(Doctor *d) {
        char owner[128];
        struct stat st;
        Check *c;

        if (stat(d->socket, &st) < 0) {
                int e = errno;
                c = doctor_add(d, "socket", CHECK_FAIL, IMPACT_CANNOT_RUN, "no socket at %s (%s)", d->socket, strerror(e));
                if (e == EACCES)
                        check_fix(c, "a directory above %s is not searchable for you: RuntimeDirectory/DirectoryMode= "
                                     "of sandboxd.socket should be 0755", d->socket);
                else if (systemd_booted())
                        check_fix(c, "start sandboxd's socket: sudo systemctl enable --now sandboxd.socket (or run "
                                     "sandboxd --listen %s)", d->socket);
                else
                        check_fix(c, "start sandboxd (no systemd here): sudo sandboxd --listen %s (as "
                                     "scripts/quickstart.sh starts it)", d->socket);
                return -e;
        }
        if (!S_ISSOCK(st.st_mode)) {
                c = doctor_add(d, "socket", CHECK_FAIL, IMPACT_CANNOT_RUN, "%s is not a socket", d->socket);
                check_fix(c, "remove it and restart sandboxd.socket, or point --socket / $SANDBOXD_SOCKET at the right path");
                return -ENOTSOCK;
        }
        if (!may_connect(&st)) {
                c = doctor_add(d, "socket", CHECK_FAIL, IMPACT_CANNOT_RUN, "%s (mode %04o, %s) does not let uid %u connect",
                               d->socket, (unsigned) (st.st_mode & 07777), owner_names(owner, sizeof(owner), &st),
                               (unsigned) geteuid());
                fix_socket_access(c, &st);
                return -EACCES;
        }
        doctor_add(d, "socket", CHECK_OK, IMPACT_NONE, "%s (mode %04o, %s) lets uid %u connect", d->socket,
                   (unsigned) (st.st_mode & 07777), owner_names(owner, sizeof(owner), &st), (unsigned) geteuid());
        return 0;
}

static void check_daemon(Doctor *d) {
        _cleanup_(sbx_client_freep) SbxClient *client = NULL;
        _cleanup_json_ json_object *reply = NULL;
        int r = sbx_client_connect(d->socket, &client);
        Check *c;

        if (r >= 0)
                r = sbx_client_call(client, request_new("hello"), NULL, NULL, &reply);
        if (r < 0 || !sbx_reply_ok(reply)) {
                c = doctor_add(d, "daemon", CHECK_FAIL, IMPACT_CANNOT_RUN, "sandboxd does not answer at %s: %s", d->socket,
                               r < 0 ? strerror(-r) : sbx_reply_error_message(reply) ?: "error reply");
                if (r == -ECONNREFUSED && systemd_booted())
                        check_fix(c, "nothing listens there: sudo systemctl restart sandboxd.socket");
                else if (r == -ECONNREFUSED)
                        check_fix(c, "nothing listens there (a stale socket: sandboxd stopped?): start it again (no "
                                     "systemd here): sudo sandboxd --listen %s", d->socket);
                else if (systemd_booted())
                        check_fix(c, "see why: journalctl -u sandboxd.service -n 50");
                else
                        check_fix(c, "see why on the stderr of sandboxd where it was started (no systemd here)");
                return;
        }
        doctor_add(d, "daemon", CHECK_OK, IMPACT_NONE, "sandboxd %s (protocol %s) answers",
                   json_str(reply, "version") ?: "?", json_object_get_string(json_child(reply, "protocol")));
        d->hello = TAKE_PTR(reply);
}

/* ---- Delegation and what the daemon enforces --------------------------------------------- */

static unsigned controllers_of(const char *cgroup) {
        char path[PATH_MAX], buf[256];
        FILE *f;
        size_t n;

        snprintf(path, sizeof(path), "%s/cgroup.controllers", cgroup);
        f = fopen(path, "re");
        if (!f)
                return 0;
        n = fread(buf, 1, sizeof(buf) - 1, f);
        fclose(f);
        buf[n] = '\0';
        return doctor_parse_controllers(buf);
}

static bool unit_has_delegate(const char *path) {
        _cleanup_free_ char *line = NULL;
        size_t alloc = 0;
        bool yes = false;
        FILE *f = fopen(path, "re");

        if (!f)
                return false;
        while (getline(&line, &alloc, f) >= 0)
                if (strncmp(line, "Delegate=", 9) == 0)
                        yes = strncmp(line + 9, "yes", 3) == 0 || strncmp(line + 9, "true", 4) == 0 || line[9] == '1';
        fclose(f);
        return yes;
}

/* Without the daemon: does an installed sandboxd.service ask systemd for delegation? */
static void check_delegation_offline(Doctor *d) {
        static const char *const units[] = {
                "/etc/systemd/system/sandboxd.service.d/override.conf", "/etc/systemd/system/sandboxd.service",
                "/usr/lib/systemd/system/sandboxd.service", "/lib/systemd/system/sandboxd.service",
                "/usr/local/lib/systemd/system/sandboxd.service",
        };

        for (size_t i = 0; i < ELEMENTSOF(units); i++)
                if (unit_has_delegate(units[i])) {
                        doctor_add(d, "delegation", CHECK_OK, IMPACT_NONE,
                                   "%s asks systemd to delegate its cgroup (Delegate=yes); not checked live: sandboxd "
                                   "does not answer", units[i]);
                        return;
                }
        doctor_add(d, "delegation", CHECK_WARN, IMPACT_NONE,
                   "not checked: sandboxd does not answer and no installed sandboxd.service has Delegate=yes");
}

static const char *hello_cgroup_root(json_object *hello) {
        return json_str(json_child(hello, "capabilities"), "cgroup_root");
}

/* The daemon's subtree must offer every controller the root offers: else it was not delegated. */
static void check_delegation(Doctor *d) {
        const char *root = hello_cgroup_root(d->hello);
        unsigned here, lost;
        char buf[64];
        Check *c;

        if (!root || !d->cg_mount) {
                doctor_add(d, "delegation", CHECK_WARN, IMPACT_NONE, "sandboxd did not say which cgroup it owns");
                return;
        }
        here = controllers_of(root);
        lost = d->v2_controllers & DOC_ALL & ~here;
        if (!lost) {
                doctor_add(d, "delegation", CHECK_OK, IMPACT_NONE, "sandboxd owns %s, where %s %s available", root,
                           here ? doctor_mask_names(buf, sizeof(buf), here) : "no controller",
                           __builtin_popcount(here) == 1 ? "is" : here ? "are" : "is");
                return;
        }
        c = doctor_add(d, "delegation", CHECK_WARN, IMPACT_BEST_EFFORT,
                       "sandboxd's cgroup %s lacks %s, which the cgroup v2 root offers: it was not delegated", root,
                       doctor_mask_names(buf, sizeof(buf), lost));
        check_fix(c, "add Delegate=yes to the [Service] section of sandboxd.service (sudo systemctl edit sandboxd.service), "
                     "then sudo systemctl restart sandboxd.service; without systemd, give sandboxd a cgroup_root whose "
                     "parent enables them in cgroup.subtree_control");
}

/* Where the daemon puts the sandboxes (hello's capabilities.placement): said, never a fault. */
static void check_placement(Doctor *d) {
        const char *p = json_str(json_child(d->hello, "capabilities"), "placement");

        if (!p)
                return;
        if (strcmp(p, "scope") == 0)
                doctor_add(d, "placement", CHECK_OK, IMPACT_NONE,
                           "each sandbox in a transient scope of its own (sandboxd-<id>.scope in sandboxd.slice): a "
                           "restart, a crash or an upgrade of sandboxd leaves their processes running");
        else
                doctor_add(d, "placement", CHECK_OK, IMPACT_NONE,
                           "the sandboxes are in sandboxd's cgroup subtree (no systemd to make scopes): their processes "
                           "outlive the daemon as long as nothing kills that subtree");
}

static bool doctor_has_fix(const Doctor *d, const char *name) {
        for (size_t i = 0; i < d->n_checks; i++)
                if (strcmp(d->checks[i].name, name) == 0 && d->checks[i].fix)
                        return true;
        return false;
}

/* Points at the fixes printed above, those only; with none, the daemon has not seen what the
 * host offers now. */
static void fix_enforced(const Doctor *d, Check *c) {
        bool controllers = doctor_has_fix(d, "controllers"), delegation = doctor_has_fix(d, "delegation");

        if (controllers && delegation)
                check_fix(c, "see the fixes of 'controllers' and 'delegation' above, then restart sandboxd");
        else if (controllers || delegation)
                check_fix(c, "see the fix of '%s' above, then restart sandboxd", controllers ? "controllers" : "delegation");
        else
                check_fix(c, "sandboxd reads what its cgroup offers when it starts: restart it (sudo systemctl restart "
                             "sandboxd.service)");
}

/* What the daemon says it can enforce: the last word on limits. */
static void check_enforced(Doctor *d) {
        json_object *cg = json_child(json_child(d->hello, "capabilities"), "cgroup");
        unsigned enforced = 0;
        char buf[64];
        Check *c;

        for (size_t i = 0; i < ELEMENTSOF(doctor_controllers); i++)
                if (json_true(cg, doctor_controllers[i]))
                        enforced |= 1u << i;
        if (enforced == DOC_ALL) {
                doctor_add(d, "limits", CHECK_OK, IMPACT_NONE, "sandboxd enforces memory, pids and cpu limits");
                return;
        }
        c = doctor_add(d, "limits", CHECK_WARN, IMPACT_BEST_EFFORT,
                       "sandboxd cannot enforce %s limits: sandboxes run only best-effort (--best-effort)",
                       doctor_mask_names(buf, sizeof(buf), DOC_ALL & ~enforced));
        fix_enforced(d, c);
}

/* ---- The report -------------------------------------------------------------------------- */

static const char *const status_names[] = { "ok", "warn", "fail" };
static const char *const verdict_names[] = { "full", "best_effort", "cannot_run" };
static const char *const impact_names[] = { "none", "best_effort", "cannot_run" };
static const char *const verdict_text[] = {
        "sandboxes can run here with every limit enforced",
        "sandboxes can run here, but only best-effort: some limits cannot be enforced",
        "sandboxes cannot run here",
};

static CheckImpact doctor_verdict(const Doctor *d) {
        CheckImpact v = IMPACT_NONE;

        for (size_t i = 0; i < d->n_checks; i++)
                if (d->checks[i].impact > v)
                        v = d->checks[i].impact;
        return v;
}

static void print_text(const Doctor *d, CheckImpact verdict) {
        for (size_t i = 0; i < d->n_checks; i++) {
                const Check *c = &d->checks[i];
                printf("%-5s %-18s %s\n", status_names[c->status], c->name, esc(c->message ?: ""));
                if (c->fix)
                        printf("%-5s %-18s fix: %s\n", "", "", esc(c->fix));
        }
        printf("\nverdict: %s (%s)\n", verdict_text[verdict], verdict_names[verdict]);
}

static void print_report_json(const Doctor *d, CheckImpact verdict) {
        _cleanup_json_ json_object *o = json_object_new_object();
        json_object *arr = json_object_new_array();

        for (size_t i = 0; i < d->n_checks; i++) {
                const Check *c = &d->checks[i];
                json_object *j = json_object_new_object();
                json_object_object_add(j, "name", json_object_new_string(c->name));
                json_object_object_add(j, "status", json_object_new_string(status_names[c->status]));
                json_object_object_add(j, "impact", json_object_new_string(impact_names[c->impact]));
                json_object_object_add(j, "message", json_object_new_string(c->message ?: ""));
                json_object_object_add(j, "fix", c->fix ? json_object_new_string(c->fix) : NULL);
                json_object_array_add(arr, j);
        }
        json_object_object_add(o, "verdict", json_object_new_string(verdict_names[verdict]));
        json_object_object_add(o, "exit_status", json_object_new_int((int) verdict));
        json_object_object_add(o, "checks", arr);
        print_json(o);
}

/* XFS's quotas are a build option of their own (CONFIG_XFS_QUOTA), which adds /proc/fs/xfs/xqm
 * beside /proc/fs/xfs/stat: 1 yes, 0 no, -1 unknown (XFS not loaded). */
static int xfs_quotas(void) {
        if (access("/proc/fs/xfs/stat", F_OK) < 0)
                return -1;
        return access("/proc/fs/xfs/xqm", F_OK) == 0;
}

/* Disk limits: the filesystem's at write time (project quotas), or the sweep's after the fact.
 * Not a best-effort verdict: a limit only a default gives stays the sweep's and every create
 * goes on; one a request asks for is refused there (limit_unenforceable), as the line says. */
static void check_disk_limits(Doctor *d) {
        json_object *disk = json_child(json_child(d->hello, "capabilities"), "disk");
        const char *how = json_str(disk, "how"), *storage = json_str(disk, "storage");
        const char *fs = json_str(disk, "fs"), *snaps = json_str(disk, "snapshots");
        bool subvol = snaps && strcmp(snaps, "subvolume") == 0;
        const char *reflink = subvol ? "snapshots: btrfs subvolume snapshots (O(1): forks and restores copy nothing)"
                              : json_true(disk, "reflink") ? "copies share blocks (reflinks)"
                                                           : "copies copy data (no reflinks)";
        Check *c;

        if (!disk)
                return;
        if (json_true(disk, "enforced")) {
                doctor_add(d, "disk-limits", CHECK_OK, IMPACT_NONE, "disk limits are enforced at write time: %s (storage %s, %s); %s%s",
                           how ?: "?", storage ?: "?", fs ?: "?", reflink,
                           json_true(disk, "files_enforced") || !json_child(disk, "files_enforced")
                                   ? ""
                                   : "; limits.files is not enforceable here (needs --best-effort)");
                return;
        }
        if (subvol) {
                c = doctor_add(d, "disk-limits", CHECK_WARN, IMPACT_NONE,
                               "disk limits are applied by the sweep after the fact, not at write time (%s); %s", how ?: "?",
                               reflink);
                check_fix(c, "btrfs quotas (qgroups) could not be turned on for the storage image; see the daemon's log, "
                             "or use storage = image:SIZE (XFS with project quotas)");
                return;
        }
        c = doctor_add(d, "disk-limits", CHECK_WARN, IMPACT_NONE,
                       "disk limits are applied by the sweep after the fact, not at write time (%s); a create that asks "
                       "for limits.disk needs --best-effort; %s", how ?: "?", reflink);
        if (xfs_quotas() == 0 && !(storage && strcmp(storage, "image") == 0))
                check_fix(c, "this kernel's XFS has no quotas (built without CONFIG_XFS_QUOTA), so an XFS image or state "
                             "directory cannot give them: set storage = image:200G:btrfs in sandboxd.conf (btrfs qgroups; "
                             "btrfs-progs installed), or keep the state directory on ext4 made with -O project,quota and "
                             "mounted prjquota; then restart sandboxd (sandboxd.conf(5))");
        else if (storage && strcmp(storage, "image") == 0)
                check_fix(c, "the storage image is mounted without project quotas (the daemon's log says why): this "
                             "kernel has none for XFS; switch to storage = image:200G:btrfs (btrfs qgroups): destroy every "
                             "sandbox, stop sandboxd, umount <state_dir>/sandboxes, remove <state_dir>/storage.img and "
                             "storage.img.loop, then set it and start sandboxd");
        else
                check_fix(c, "set storage = image:200G in sandboxd.conf (an XFS image of the daemon's own, made and mounted "
                             "at start), or keep the state directory on XFS mounted with prjquota or on ext4 made with "
                             "-O project,quota and mounted prjquota; then restart sandboxd (sandboxd.conf(5))");
}

static int doctor_parse(int argc, char *argv[], const char **state_dir) {
        enum { ARG_STATE_DIR = ARG_VERB_FIRST };
        const VerbOption options[] = { { "state-dir", ARG_STATE_DIR, .value = state_dir }, {} };
        int r = parse_verb_options(&verb_doctor, argc, argv, "h", options, 0, 0);

        if (r > 0 && *state_dir && (*state_dir)[0] != '/')
                return log_error("--state-dir needs an absolute path, not '%s'", *state_dir);
        return r;
}

static void doctor_run_checks(Doctor *d, bool state_dir_given) {
        doctor_check_cgroup2(d);
        doctor_check_controllers(d);
        if (check_socket(d) == 0)
                check_daemon(d);
        if (d->hello) {
                check_delegation(d);
                check_placement(d);
                check_enforced(d);
                check_disk_limits(d);
        } else
                check_delegation_offline(d);
        doctor_check_userns(d);
        doctor_check_kernel(d);
        if (!state_dir_given && json_str(json_child(d->hello, "capabilities"), "state_dir"))
                d->state_dir = json_str(json_child(d->hello, "capabilities"), "state_dir");
        doctor_check_disk(d);
}

static int verb_doctor_run(int argc, char *argv[]) {
        static const char default_state_dir[] = LOCALSTATEDIR "/lib/sandboxd";
        Doctor d = { .state_dir = default_state_dir };
        CheckImpact verdict;
        int r = doctor_parse(argc, argv, &d.state_dir);

        if (r <= 0)
                return r;
        d.socket = daemon_socket_path();
        doctor_run_checks(&d, d.state_dir != default_state_dir);
        verdict = doctor_verdict(&d);
        if (arg.json)
                print_report_json(&d, verdict);
        else
                print_text(&d, verdict);
        doctor_done(&d);
        return (int) verdict;
}
