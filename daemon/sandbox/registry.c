/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "registry.h"

int registry_init(Registry *reg, unsigned n_uid_slots) {
        *reg = (Registry) { .n_uid_slots = n_uid_slots };
        reg->uid_slots = calloc(n_uid_slots ? n_uid_slots : 1, 1);
        reg->tombstones = calloc(REGISTRY_TOMBSTONES, sizeof(*reg->tombstones));
        if (!reg->uid_slots || !reg->tombstones) {
                registry_done(reg);
                return -ENOMEM;
        }
        return 0;
}

/* The entries are their owners' to free (before this). */
void registry_done(Registry *reg) {
        free(reg->uid_slots);
        free(reg->tombstones);
        reg->uid_slots = NULL;
        reg->tombstones = NULL;
        reg->n_observers = 0;
}

int registry_observe(Registry *reg, registry_observer_t fn, void *userdata) {
        if (reg->n_observers >= REGISTRY_MAX_OBSERVERS)
                return -E2BIG;
        reg->observers[reg->n_observers++] = (RegistryObserver) { fn, userdata };
        return 0;
}

static int registry_tell(Registry *reg, RegistryEvent ev, RegistryEntry *e) {
        int ret = 0;

        for (unsigned i = 0; i < reg->n_observers; i++) {
                int r = reg->observers[i].fn(reg, ev, e, reg->observers[i].userdata);
                if (r < 0 && ret == 0)
                        ret = r;
        }
        return ret;
}

void registry_add(Registry *reg, RegistryEntry *e, void *data) {
        e->registry = reg;
        e->data = data;
        e->prev = NULL;
        e->next = reg->head;
        if (reg->head)
                reg->head->prev = e;
        reg->head = e;
        reg->n_entries++;
        if (e->pooled)
                reg->n_pooled++;
        (void) registry_tell(reg, REGISTRY_ADDED, e);
}

void registry_remove(RegistryEntry *e) {
        Registry *reg = e->registry;

        if (!reg)
                return;
        if (e->prev)
                e->prev->next = e->next;
        else
                reg->head = e->next;
        if (e->next)
                e->next->prev = e->prev;
        e->next = e->prev = NULL;
        e->registry = NULL;
        reg->n_entries--;
        if (e->pooled)
                reg->n_pooled--;
        /* Told after the unlink: an observer that walks the registry (the pool's refill) does not
         * see the entry going away, as sandbox_free() did not. */
        (void) registry_tell(reg, REGISTRY_FREED, e);
}

int registry_changed(RegistryEntry *e) {
        return e->registry ? registry_tell(e->registry, REGISTRY_CHANGED, e) : 0;
}

void registry_set_pooled(RegistryEntry *e, bool pooled) {
        if (e->pooled == pooled)
                return;
        e->pooled = pooled;
        if (e->registry) {
                if (pooled)
                        e->registry->n_pooled++;
                else
                        e->registry->n_pooled--;
        }
}

void *registry_find(Registry *reg, const char *id) {
        RegistryEntry *found = NULL;

        for (RegistryEntry *e = reg->head; e; e = e->next)
                if (!found && strcmp(e->id, id) == 0)
                        found = e;
        return found ? found->data : NULL;
}

void *registry_find_named(Registry *reg, uid_t owner, const char *name) {
        RegistryEntry *found = NULL;

        for (RegistryEntry *e = reg->head; e; e = e->next)
                if (!found && e->name && e->owner == owner && strcmp(e->name, name) == 0)
                        found = e;
        return found ? found->data : NULL;
}

void *registry_first(Registry *reg) {
        return reg->head ? reg->head->data : NULL;
}

void *registry_next(RegistryEntry *e) {
        return e->next ? e->next->data : NULL;
}

unsigned registry_count(Registry *reg) {
        return reg->n_entries;
}

unsigned registry_count_pooled(Registry *reg) {
        return reg->n_pooled;
}

unsigned registry_count_owned(Registry *reg, uid_t owner) {
        unsigned n = 0;
        for (RegistryEntry *e = reg->head; e; e = e->next)
                n += e->owner == owner && !e->pooled;
        return n;
}

void registry_add_tombstone(Registry *reg, const char *id, uid_t owner) {
        Tombstone *t = &reg->tombstones[reg->tombstone_next];

        snprintf(t->id, sizeof(t->id), "%s", id);
        t->owner_uid = owner;
        reg->tombstone_next = (reg->tombstone_next + 1) % REGISTRY_TOMBSTONES;
        if (reg->n_tombstones < REGISTRY_TOMBSTONES)
                reg->n_tombstones++;
}

/* The whole ring every time, for the same reason as the lookups. */
bool registry_find_tombstone(Registry *reg, const char *id, uid_t *ret_owner) {
        const Tombstone *found = NULL;

        for (unsigned i = 0; i < reg->n_tombstones; i++)
                if (!found && strcmp(reg->tombstones[i].id, id) == 0)
                        found = &reg->tombstones[i];
        if (found)
                *ret_owner = found->owner_uid;
        return found;
}

int registry_alloc_uid_slot(Registry *reg, unsigned *ret) {
        for (unsigned i = 0; i < reg->n_uid_slots; i++)
                if (!reg->uid_slots[i]) {
                        reg->uid_slots[i] = 1;
                        *ret = i;
                        return 0;
                }
        return -ENOSPC;
}

int registry_claim_uid_slot(Registry *reg, unsigned slot) {
        if (slot >= reg->n_uid_slots)
                return -ERANGE;
        if (reg->uid_slots[slot])
                return -EBUSY;
        reg->uid_slots[slot] = 1;
        return 0;
}

void registry_free_uid_slot(Registry *reg, unsigned slot) {
        if (slot < reg->n_uid_slots)
                reg->uid_slots[slot] = 0;
}
