/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The registry of sandboxes: lookup by id and by (owner, name), iteration, counts, the ring of
 * tombstones (destroyed ids, for destroy's already_gone), the uid slots, and observers told
 * when an entry is added, changed (saved state: state.c) or freed (pool.c). It knows no Sandbox:
 * a sandbox embeds a RegistryEntry whose data points back at it, so that the registry is below
 * sandbox.c and not beside it. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define REGISTRY_TOMBSTONES 4096
#define REGISTRY_MAX_OBSERVERS 8

typedef struct Registry Registry;
typedef struct RegistryEntry RegistryEntry;

struct RegistryEntry {
        RegistryEntry *next, *prev;
        Registry *registry;  /* NULL while not added */
        void *data;          /* the sandbox */
        const char *id;      /* the sandbox's, alive as long as the entry */
        const char *name;    /* or NULL; unique per owner */
        uid_t owner;
        bool pooled;         /* waiting in the pool: not counted as anyone's */
};

/* A destroyed sandbox's id, for destroy's already_gone (told to its owner and admins only). */
typedef struct Tombstone {
        char id[24];
        uid_t owner_uid;
} Tombstone;

typedef enum RegistryEvent {
        REGISTRY_ADDED,
        REGISTRY_CHANGED,  /* what is kept of it changed (registry_changed()) */
        REGISTRY_FREED,    /* removed, about to be freed: data still valid */
} RegistryEvent;

/* A negative return of a REGISTRY_CHANGED observer is registry_changed()'s; the others' is ignored. */
typedef int (*registry_observer_t)(Registry *reg, RegistryEvent ev, RegistryEntry *e, void *userdata);

typedef struct RegistryObserver {
        registry_observer_t fn;
        void *userdata;
} RegistryObserver;

struct Registry {
        RegistryEntry *head;
        unsigned n_entries;     /* pooled ones included */
        unsigned n_pooled;
        unsigned n_quarantined; /* sandboxes set aside at start: their record was unreadable */
        uint8_t *uid_slots;     /* one byte per uid range: in use or not */
        unsigned n_uid_slots;
        Tombstone *tombstones;  /* a ring */
        unsigned n_tombstones, tombstone_next;
        RegistryObserver observers[REGISTRY_MAX_OBSERVERS];
        unsigned n_observers;
};

int registry_init(Registry *reg, unsigned n_uid_slots);
void registry_done(Registry *reg);

int registry_observe(Registry *reg, registry_observer_t fn, void *userdata);

/* Links e in (newest first) and tells the observers; e->id, name, owner are set by the caller. */
void registry_add(Registry *reg, RegistryEntry *e, void *data);
/* Unlinks e and tells the "freed" observers; a no-op for an entry not added. */
void registry_remove(RegistryEntry *e);
/* e's kept state changed: the first error of an observer, or 0. */
int registry_changed(RegistryEntry *e);
void registry_set_pooled(RegistryEntry *e, bool pooled);

/* By id, whoever owns it: the data, or NULL. Both lookups walk the whole list, found or not: a
 * sandbox of someone else's is not told from one that does not exist by how long it takes. */
void *registry_find(Registry *reg, const char *id);
/* By name among one owner's sandboxes: names are unique per owner, not across owners. */
void *registry_find_named(Registry *reg, uid_t owner, const char *name);

/* Iteration, newest first: for (Sandbox *s = registry_first(reg); s; s = registry_next(&s->entry)) */
void *registry_first(Registry *reg);
void *registry_next(RegistryEntry *e);

unsigned registry_count(Registry *reg);        /* every entry, pooled ones included */
unsigned registry_count_pooled(Registry *reg);
unsigned registry_count_owned(Registry *reg, uid_t owner); /* not pooled */

void registry_add_tombstone(Registry *reg, const char *id, uid_t owner);
bool registry_find_tombstone(Registry *reg, const char *id, uid_t *ret_owner);

int registry_alloc_uid_slot(Registry *reg, unsigned *ret);
/* Claims a given slot (a restored sandbox's): -EBUSY if taken, -ERANGE if past the last. */
int registry_claim_uid_slot(Registry *reg, unsigned slot);
void registry_free_uid_slot(Registry *reg, unsigned slot);
