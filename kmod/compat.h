/* SPDX-License-Identifier: GPL-2.0 */
/*
 * strixpeer - thin wrappers over kernel API differences.
 *
 * Each STRIXPEER_HAVE_* comes from one compile test in kmod/conftest.sh,
 * run against the target kernel at build time (kmod/conftest.h). Logic
 * files call the sp_* wrappers below and never test kernel versions.
 */
#ifndef _STRIXPEER_COMPAT_H
#define _STRIXPEER_COMPAT_H

#include <linux/mm.h>

#include "conftest.h"

/* vm_flags became read-only with vm_flags_set() in 6.3 (bc292ab00f6c). */
static inline void sp_vm_flags_set(struct vm_area_struct *vma,
				   unsigned long flags)
{
#ifdef STRIXPEER_HAVE_VM_FLAGS_SET
	vm_flags_set(vma, flags);
#else
	vma->vm_flags |= flags;
#endif
}

#endif /* _STRIXPEER_COMPAT_H */
