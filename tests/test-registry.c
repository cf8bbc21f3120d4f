/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The registry of sandboxes (daemon/sandbox/registry.h) on its own: lookups by id and by
 * (owner, name), iteration, counts, the tombstone ring, uid slots and the observers. Entries
 * here are bare RegistryEntry values with a tag as data: the registry knows no Sandbox. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "registry.h"
#include "tap.h"

typedef struct Item {
        char id[24];
        char name[16];
        RegistryEntry entry;
} Item;

typedef struct Seen {
        unsigned added, changed, freed;
        void *last_freed;
        unsigned count_at_freed; /* registry_count() as the freed observer ran */
        int changed_ret;
} Seen;

static int observe(Registry *reg, RegistryEvent ev, RegistryEntry *e, void *userdata) {
        Seen *seen = userdata;
        switch (ev) {
        case REGISTRY_ADDED:
                seen->added++;
                return 0;
        case REGISTRY_CHANGED:
                seen->changed++;
                return seen->changed_ret;
        case REGISTRY_FREED:
                seen->freed++;
                seen->last_freed = e->data;
                seen->count_at_freed = registry_count(reg);
                return 0;
        }
        return 0;
}

static void item_add(Registry *reg, Item *it, const char *id, const char *name, uid_t owner) {
        snprintf(it->id, sizeof(it->id), "%s", id);
        snprintf(it->name, sizeof(it->name), "%s", name ? name : "");
        it->entry = (RegistryEntry) { .id = it->id, .name = name ? it->name : NULL, .owner = owner };
        registry_add(reg, &it->entry, it);
}

static void test_lookup(void) {
        Registry reg;
        Item a, b, c;
        unsigned n = 0;

        ok(registry_init(&reg, 4) == 0, "registry_init");
        ok(registry_first(&reg) == NULL, "an empty registry has no first entry");
        item_add(&reg, &a, "sbx-000000000001", "web", 1000);
        item_add(&reg, &b, "sbx-000000000002", "web", 1001);
        item_add(&reg, &c, "sbx-000000000003", NULL, 1000);
        ok(registry_find(&reg, "sbx-000000000002") == &b, "found by id");
        ok(registry_find(&reg, "sbx-00000000000f") == NULL, "an unknown id is not found");
        ok(registry_find_named(&reg, 1000, "web") == &a, "name 'web' of uid 1000");
        ok(registry_find_named(&reg, 1001, "web") == &b, "name 'web' of uid 1001: names are per owner");
        ok(registry_find_named(&reg, 1002, "web") == NULL, "another owner's name is not found");
        ok(registry_find_named(&reg, 1000, "db") == NULL, "an unknown name is not found");
        is_int(registry_count(&reg), 3, "three entries");
        is_int(registry_count_owned(&reg, 1000), 2, "two of uid 1000");
        for (Item *it = registry_first(&reg); it; it = registry_next(&it->entry))
                n++;
        is_int(n, 3, "iteration sees every entry once");
        ok(registry_first(&reg) == &c, "newest first");

        registry_set_pooled(&c.entry, true);
        is_int(registry_count_pooled(&reg), 1, "one pooled");
        is_int(registry_count_owned(&reg, 1000), 1, "a pooled entry is no one's");
        registry_remove(&c.entry);
        is_int(registry_count_pooled(&reg), 0, "removing a pooled entry uncounts it");
        registry_remove(&c.entry);
        is_int(registry_count(&reg), 2, "removing twice is a no-op");
        registry_remove(&a.entry);
        ok(registry_find(&reg, "sbx-000000000001") == NULL, "a removed entry is not found");
        ok(registry_first(&reg) == &b && registry_next(&b.entry) == NULL, "the other one is left, alone");
        registry_remove(&b.entry);
        is_int(registry_count(&reg), 0, "empty again");
        registry_done(&reg);
}

static void test_tombstones(void) {
        Registry reg;
        uid_t owner = 0;
        char id[24];
        bool all = true;

        ok(registry_init(&reg, 1) == 0, "registry_init");
        ok(!registry_find_tombstone(&reg, "sbx-000000000001", &owner), "no tombstone yet");
        registry_add_tombstone(&reg, "sbx-000000000001", 1234);
        ok(registry_find_tombstone(&reg, "sbx-000000000001", &owner) && owner == 1234,
           "a tombstone is found, with its owner");
        /* The ring keeps the last REGISTRY_TOMBSTONES: one more pushes the first one out. */
        for (unsigned i = 2; i <= REGISTRY_TOMBSTONES; i++) {
                snprintf(id, sizeof(id), "sbx-%012x", i);
                registry_add_tombstone(&reg, id, 1000);
        }
        ok(registry_find_tombstone(&reg, "sbx-000000000001", &owner), "a full ring still has the first one");
        registry_add_tombstone(&reg, "sbx-ffffffffffff", 1000);
        ok(!registry_find_tombstone(&reg, "sbx-000000000001", &owner), "one more pushes the oldest out");
        for (unsigned i = 2; i <= REGISTRY_TOMBSTONES; i++) {
                snprintf(id, sizeof(id), "sbx-%012x", i);
                all = all && registry_find_tombstone(&reg, id, &owner);
        }
        ok(all && registry_find_tombstone(&reg, "sbx-ffffffffffff", &owner), "the others are all kept");
        registry_done(&reg);
}

static void test_uid_slots(void) {
        Registry reg;
        unsigned a = 99, b = 99, c = 99;

        ok(registry_init(&reg, 2) == 0, "registry_init with two slots");
        ok(registry_alloc_uid_slot(&reg, &a) == 0 && a == 0, "first slot 0");
        ok(registry_alloc_uid_slot(&reg, &b) == 0 && b == 1, "second slot 1");
        is_int(registry_alloc_uid_slot(&reg, &c), -ENOSPC, "a third: none left");
        registry_free_uid_slot(&reg, 0);
        ok(registry_alloc_uid_slot(&reg, &c) == 0 && c == 0, "a freed slot is given again");
        is_int(registry_claim_uid_slot(&reg, 1), -EBUSY, "claiming a slot in use");
        is_int(registry_claim_uid_slot(&reg, 2), -ERANGE, "claiming past the last");
        registry_free_uid_slot(&reg, 1);
        is_int(registry_claim_uid_slot(&reg, 1), 0, "claiming a free slot (a restored sandbox's)");
        registry_free_uid_slot(&reg, 7); /* past the end: ignored */
        is_int(registry_alloc_uid_slot(&reg, &c), -ENOSPC, "freeing past the end frees nothing");
        registry_done(&reg);
}

static void test_observers(void) {
        Registry reg;
        Seen one = {}, two = {};
        Item a, b;

        ok(registry_init(&reg, 1) == 0, "registry_init");
        ok(registry_observe(&reg, observe, &one) == 0 && registry_observe(&reg, observe, &two) == 0,
           "two observers");
        item_add(&reg, &a, "sbx-00000000000a", NULL, 0);
        item_add(&reg, &b, "sbx-00000000000b", NULL, 0);
        is_int(one.added, 2, "added: once per entry");
        is_int(two.added, 2, "... for each observer");
        is_int(registry_changed(&a.entry), 0, "changed, observers content");
        two.changed_ret = -ENOSPC;
        is_int(registry_changed(&a.entry), -ENOSPC, "changed: an observer's error is the caller's");
        is_int(one.changed, 2, "changed: told every time");
        registry_remove(&a.entry);
        is_int(one.freed, 1, "freed: once");
        ok(one.last_freed == &a, "freed: with the entry's data");
        is_int(one.count_at_freed, 1, "freed: told after the entry left the registry");
        registry_remove(&a.entry);
        is_int(one.freed, 1, "removing again tells nobody");
        is_int(registry_changed(&a.entry), 0, "a removed entry's change tells nobody");
        is_int(one.changed, 2, "... indeed");
        registry_remove(&b.entry);
        is_int(two.freed, 2, "every removal told to every observer");
        for (unsigned i = 2; i < REGISTRY_MAX_OBSERVERS; i++)
                (void) registry_observe(&reg, observe, &one);
        is_int(registry_observe(&reg, observe, &one), -E2BIG, "past REGISTRY_MAX_OBSERVERS: refused");
        registry_done(&reg);
}

int main(void) {
        test_lookup();
        test_tombstones();
        test_uid_slots();
        test_observers();
        return done_testing();
}
