// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "capture/elfsym.h"

/*
 * What one file's symbols may cost. The largest unstripped C++ libraries of
 * deep-learning stacks hold about a million function symbols of ~100-byte
 * names; a file the traced side made could declare a symbol table as large as
 * itself (16 GiB, capture/tfile.h) and make the reader allocate more than the
 * machine has. Beyond these the file is refused.
 */
#define DL_ELF_MAX_SYMS (8u << 20)
#define DL_ELF_MAX_NAME_BYTES (1ull << 30)
/*
 * Entries looked at, functions or not: a table of zeros in a sparse file of
 * the traced side's holds no function to stop at the caps above, and walking
 * 16 GiB of it takes minutes.
 */
#define DL_ELF_MAX_ENTRIES (2u * DL_ELF_MAX_SYMS)

/* Symbol values are virtual addresses; uprobes want file offsets, found through the PT_LOAD holding it. */
static int vaddr_to_offset(Elf *elf, uint64_t vaddr, uint64_t *off)
{
	size_t nph;

	if (elf_getphdrnum(elf, &nph))
		return -1;
	for (size_t i = 0; i < nph; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD || !(ph.p_flags & PF_X))
			continue;
		if (vaddr >= ph.p_vaddr && vaddr < ph.p_vaddr + ph.p_filesz) {
			*off = vaddr - ph.p_vaddr + ph.p_offset;
			return 0;
		}
	}
	return -1;
}

static int load_section(Elf *elf, Elf_Scn *scn, GElf_Shdr *sh, struct dl_elf_syms *s, uint64_t *name_bytes)
{
	Elf_Data *data = elf_getdata(scn, NULL);
	size_t entry = gelf_fsize(elf, ELF_T_SYM, 1, EV_CURRENT), count;

	if (!data || !entry)
		return 0;
	/* Entries as libelf holds them: sh_size / sh_entsize is the file's claim, any number when corrupt. */
	count = data->d_size / entry;
	if (count > DL_ELF_MAX_ENTRIES)
		return -EFBIG;
	/* Most entries are not functions: reserve for what a real library has, grow past it. */
	dl_vec_reserve(&s->by_offset, s->by_offset.n + (count < (1u << 16) ? count : (1u << 16)));
	for (size_t i = 0; i < count; i++) {
		GElf_Sym sym;
		const char *name;
		uint64_t off;

		if (!gelf_getsym(data, (int)i, &sym))
			continue;
		if (GELF_ST_TYPE(sym.st_info) != STT_FUNC && GELF_ST_TYPE(sym.st_info) != STT_GNU_IFUNC)
			continue;
		if (sym.st_shndx == SHN_UNDEF || sym.st_value == 0)
			continue;
		name = elf_strptr(elf, sh->sh_link, sym.st_name);
		if (!name || !*name || vaddr_to_offset(elf, sym.st_value, &off))
			continue;
		*name_bytes += strlen(name) + 1;
		if (s->by_offset.n >= DL_ELF_MAX_SYMS || *name_bytes > DL_ELF_MAX_NAME_BYTES)
			return -EFBIG;
		*dl_vec_push(&s->by_offset) = (struct dl_elf_sym){
			.name = dl_xstrdup(name), .offset = off, .size = sym.st_size, .bind = GELF_ST_BIND(sym.st_info),
		};
	}
	return 0;
}

static int cmp_offset(const void *a, const void *b)
{
	const struct dl_elf_sym *x = a, *y = b;

	if (x->offset != y->offset)
		return x->offset < y->offset ? -1 : 1;
	/* Among aliases, a global sorts first so lookups by offset name it. */
	return (x->bind != STB_GLOBAL) - (y->bind != STB_GLOBAL);
}

int dl_elf_syms_load_fd(int fd, struct dl_elf_syms *s)
{
	Elf_Scn *scn = NULL;
	uint64_t name_bytes = 0;
	int err = 0;
	Elf *elf;

	memset(s, 0, sizeof(*s));
	if (elf_version(EV_CURRENT) == EV_NONE)
		return -EINVAL;
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!elf)
		return -EINVAL;
	if (elf_kind(elf) != ELF_K_ELF) {
		elf_end(elf);
		return -ENOEXEC;
	}
	while (!err && (scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;

		if (!gelf_getshdr(scn, &sh))
			continue;
		if (sh.sh_type == SHT_SYMTAB)
			s->has_symtab = 1;
		if (sh.sh_type == SHT_SYMTAB || sh.sh_type == SHT_DYNSYM)
			err = load_section(elf, scn, &sh, s, &name_bytes);
	}
	elf_end(elf);
	if (err) {
		dl_elf_syms_free(s);
		return err;
	}
	/* A file without function symbols leaves v NULL, which qsort may not be given even for 0 items. */
	if (s->by_offset.n)
		qsort(s->by_offset.v, s->by_offset.n, sizeof(*s->by_offset.v), cmp_offset);
	return 0;
}

int dl_elf_syms_load(const char *path, struct dl_elf_syms *s)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC), err;

	if (fd < 0) {
		memset(s, 0, sizeof(*s));
		return -errno;
	}
	err = dl_elf_syms_load_fd(fd, s);
	close(fd);
	return err;
}

void dl_elf_syms_free(struct dl_elf_syms *s)
{
	for (size_t i = 0; i < s->by_offset.n; i++)
		free(s->by_offset.v[i].name);
	dl_vec_free(&s->by_offset);
	memset(s, 0, sizeof(*s));
}

const struct dl_elf_sym *dl_elf_sym_by_name(const struct dl_elf_syms *s, const char *name)
{
	const struct dl_elf_sym *best = NULL;

	for (size_t i = 0; i < s->by_offset.n; i++) {
		const struct dl_elf_sym *c = &s->by_offset.v[i];

		if (strcmp(c->name, name) != 0)
			continue;
		if (c->bind == STB_GLOBAL)
			return c;
		if (!best)
			best = c;
	}
	return best;
}

const struct dl_elf_sym *dl_elf_sym_by_offset(const struct dl_elf_syms *s, uint64_t offset)
{
	const struct dl_elf_sym *v = s->by_offset.v, *c;
	size_t lo = 0, hi = s->by_offset.n;

	/* Last symbol starting at or before offset. */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (v[mid].offset <= offset)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return NULL;
	/* Back to the first alias at that offset, which sorts global first. */
	while (lo > 1 && v[lo - 2].offset == v[lo - 1].offset)
		lo--;
	c = &v[lo - 1];
	/* Measured from the symbol's start: a corrupt size near 2^64 would wrap start + size. */
	if (offset - c->offset < (c->size ? c->size : 1))
		return c;
	return NULL;
}

static void want_bytes(Elf *elf, const GElf_Sym *sym, struct dl_elf_want *w)
{
	Elf_Scn *scn = elf_getscn(elf, sym->st_shndx);
	GElf_Shdr sh;
	Elf_Data *d;
	size_t len = w->len;

	w->len = 0;
	if (sym->st_shndx >= SHN_LORESERVE || !scn || !gelf_getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS || sym->st_value < sh.sh_addr)
		return;
	d = elf_getdata(scn, NULL);
	if (!d || !d->d_buf || sym->st_value - sh.sh_addr > d->d_size || len > d->d_size - (sym->st_value - sh.sh_addr))
		return;
	memcpy(w->bytes, (const char *)d->d_buf + (sym->st_value - sh.sh_addr), len);
	w->len = len;
}

int dl_elf_find_fd(int fd, struct dl_elf_want *want, int n, uint64_t *first_vaddr)
{
	Elf_Scn *scn = NULL;
	size_t nph;
	Elf *elf;

	elf_version(EV_CURRENT);
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!elf)
		return -EINVAL;
	*first_vaddr = 0;
	if (!elf_getphdrnum(elf, &nph))
		for (size_t i = 0; i < nph; i++) {
			GElf_Phdr ph;

			if (gelf_getphdr(elf, (int)i, &ph) && ph.p_type == PT_LOAD) {
				*first_vaddr = ph.p_vaddr - ph.p_offset;
				break;
			}
		}
	while ((scn = elf_nextscn(elf, scn))) {
		size_t cnt, ent = gelf_fsize(elf, ELF_T_SYM, 1, EV_CURRENT);
		GElf_Shdr sh;
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) || (sh.sh_type != SHT_DYNSYM && sh.sh_type != SHT_SYMTAB))
			continue;
		d = elf_getdata(scn, NULL);
		if (!d || !ent)
			continue;
		cnt = d->d_size / ent;
		for (size_t i = 0; i < cnt && i < DL_ELF_MAX_SYMS; i++) {
			const char *nm;
			GElf_Sym sym;

			if (!gelf_getsym(d, (int)i, &sym) || sym.st_shndx == SHN_UNDEF || !sym.st_value)
				continue;
			nm = elf_strptr(elf, sh.sh_link, sym.st_name);
			for (int k = 0; nm && k < n; k++)
				if (!want[k].value && !strcmp(nm, want[k].name)) {
					want[k].value = sym.st_value;
					if (want[k].bytes)
						want_bytes(elf, &sym, &want[k]);
				}
		}
	}
	elf_end(elf);
	for (int k = 0; k < n; k++)
		if (!want[k].value)
			want[k].len = 0;
	return 0;
}

int dl_elf_needs_fd(int fd, const char *prefix)
{
	Elf_Scn *scn = NULL;
	int found = 0;
	Elf *elf;

	elf_version(EV_CURRENT);
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!elf)
		return -EINVAL;
	while (!found && (scn = elf_nextscn(elf, scn))) {
		size_t ent = gelf_fsize(elf, ELF_T_DYN, 1, EV_CURRENT);
		GElf_Shdr sh;
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNAMIC || !(d = elf_getdata(scn, NULL)) || !ent)
			continue;
		for (size_t i = 0; i < d->d_size / ent; i++) {
			const char *nm;
			GElf_Dyn dyn;

			if (!gelf_getdyn(d, (int)i, &dyn) || dyn.d_tag == DT_NULL)
				break;
			if (dyn.d_tag != DT_NEEDED)
				continue;
			nm = elf_strptr(elf, sh.sh_link, dyn.d_un.d_val);
			if (nm && !strncmp(nm, prefix, strlen(prefix))) {
				found = 1;
				break;
			}
		}
	}
	elf_end(elf);
	return found;
}
