// SPDX-License-Identifier: MIT
/*
 * vulkan_import - a Vulkan device (RADV) fills a strixpeer buffer that any
 * NIC registers
 *
 *   vulkan_import [SIZE]       (default 64 MiB)
 *
 * The Vulkan route to NIC-registrable memory, for what llama.cpp's Vulkan
 * backend and other RADV users run: the buffer's dma-buf imported as
 * device memory. Not a host pointer: VK_EXT_external_memory_host makes
 * RADV create a gfx userptr BO with AMDGPU_GEM_USERPTR_ANONONLY (libdrm's
 * amdgpu_create_bo_from_user_mem()), which amdgpu refuses for a mapping
 * with a file - a strixpeer buffer's mapping is one (EPERM).
 *
 *  1. sp_buf_alloc(), sp_buf_export(): a strixpeer buffer and its dma-buf;
 *  2. a device with VK_KHR_external_memory_fd and
 *     VK_EXT_external_memory_dma_buf;
 *  3. vkGetMemoryFdPropertiesKHR(DMA_BUF, fd): the memory types the fd
 *     can be imported as (RADV: amdgpu imports the foreign dma-buf into
 *     GTT - PRIME, amdgpu_gem_prime_import() - and offers the GTT types);
 *  4. a VkBuffer created with VkExternalMemoryBufferCreateInfo(DMA_BUF),
 *     memory of a type allowed by both the buffer and the fd, preferring
 *     host-coherent, allocated with VkImportMemoryFdInfoKHR (Vulkan owns
 *     the fd from then on) and VkMemoryDedicatedAllocateInfo;
 *  5. the GPU writes (vkCmdFillBuffer; a compute shader in a real program),
 *     a barrier from TRANSFER_WRITE to HOST_READ, and vkWaitForFences()
 *     before anyone else reads: the fence says the GPU is done, the
 *     barrier makes its writes visible outside the GPU (the NIC does not
 *     see the GPU's caches either; docs/gpu-memory.md, "What the NIC
 *     sees");
 *  6. ibv_reg_mr() on the buffer's CPU mapping, and the CPU checks what
 *     the GPU wrote.
 *
 * Build (Vulkan's loader and headers, e.g. Debian's libvulkan-dev):
 *   cc -O2 vulkan_import.c -o vulkan_import \
 *       $(pkg-config --cflags --libs strixpeer vulkan)
 * The suite compiles this file; no test here runs a GPU (what is said of
 * RADV and amdgpu is read from Mesa's and Linux's sources and Vulkan's
 * specification, not tried on hardware).
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <infiniband/verbs.h>
#include <vulkan/vulkan.h>
#include <strixpeer.h>
#include "example.h"

#define VK(call) do { VkResult r_ = (call); if (r_ != VK_SUCCESS) \
	DIE("vulkan_import: %s: VkResult %d", #call, (int)r_); } while (0)

static const char *const dev_exts[] = {
	VK_KHR_EXTERNAL_MEMORY_FD_EXTENSION_NAME,
	VK_EXT_EXTERNAL_MEMORY_DMA_BUF_EXTENSION_NAME,
};

static int has_exts(VkPhysicalDevice pdev)
{
	VkExtensionProperties *props;
	uint32_t n = 0, found = 0;

	vkEnumerateDeviceExtensionProperties(pdev, NULL, &n, NULL);
	props = calloc(n ? n : 1, sizeof(*props));
	if (!props)
		DIE("vulkan_import: out of memory");
	vkEnumerateDeviceExtensionProperties(pdev, NULL, &n, props);
	for (size_t e = 0; e < sizeof(dev_exts) / sizeof(dev_exts[0]); e++)
		for (uint32_t i = 0; i < n; i++)
			if (!strcmp(props[i].extensionName, dev_exts[e])) {
				found++;
				break;
			}
	free(props);
	return found == sizeof(dev_exts) / sizeof(dev_exts[0]);
}

/* A memory type in @bits, host-coherent if one is. */
static uint32_t pick_type(VkPhysicalDevice pdev, uint32_t bits)
{
	VkPhysicalDeviceMemoryProperties mp;
	uint32_t any = UINT32_MAX;

	vkGetPhysicalDeviceMemoryProperties(pdev, &mp);
	for (uint32_t i = 0; i < mp.memoryTypeCount; i++) {
		if (!(bits & (1U << i)))
			continue;
		if (mp.memoryTypes[i].propertyFlags & VK_MEMORY_PROPERTY_HOST_COHERENT_BIT)
			return i;
		if (any == UINT32_MAX)
			any = i;
	}
	if (any == UINT32_MAX)
		DIE("vulkan_import: no memory type both the buffer and the dma-buf allow");
	return any;
}

int main(int argc, char **argv)
{
	size_t len = argc > 1 ? strtoull(argv[1], NULL, 0) : 64UL << 20;
	VkApplicationInfo app = { .sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
				  .pApplicationName = "vulkan_import",
				  .apiVersion = VK_API_VERSION_1_1 };
	VkInstanceCreateInfo ici = { .sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
				     .pApplicationInfo = &app };
	float prio = 1.0f;
	VkDeviceQueueCreateInfo qci = { .sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
					.queueCount = 1, .pQueuePriorities = &prio };
	VkDeviceCreateInfo dci = { .sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
				   .queueCreateInfoCount = 1, .pQueueCreateInfos = &qci,
				   .enabledExtensionCount = sizeof(dev_exts) / sizeof(dev_exts[0]),
				   .ppEnabledExtensionNames = dev_exts };
	VkExternalMemoryBufferCreateInfo ebci = {
		.sType = VK_STRUCTURE_TYPE_EXTERNAL_MEMORY_BUFFER_CREATE_INFO,
		.handleTypes = VK_EXTERNAL_MEMORY_HANDLE_TYPE_DMA_BUF_BIT_EXT };
	VkBufferCreateInfo bci = { .sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, .pNext = &ebci,
				   .usage = VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
					    VK_BUFFER_USAGE_TRANSFER_DST_BIT |
					    VK_BUFFER_USAGE_STORAGE_BUFFER_BIT,
				   .sharingMode = VK_SHARING_MODE_EXCLUSIVE };
	VkMemoryFdPropertiesKHR fdp = { .sType = VK_STRUCTURE_TYPE_MEMORY_FD_PROPERTIES_KHR };
	VkMemoryDedicatedAllocateInfo ded = {
		.sType = VK_STRUCTURE_TYPE_MEMORY_DEDICATED_ALLOCATE_INFO };
	VkImportMemoryFdInfoKHR imp = { .sType = VK_STRUCTURE_TYPE_IMPORT_MEMORY_FD_INFO_KHR,
					.pNext = &ded,
					.handleType = VK_EXTERNAL_MEMORY_HANDLE_TYPE_DMA_BUF_BIT_EXT };
	VkMemoryAllocateInfo mai = { .sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
				     .pNext = &imp };
	VkCommandPoolCreateInfo cpci = { .sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO };
	VkCommandBufferAllocateInfo cbai = {
		.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
		.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY, .commandBufferCount = 1 };
	VkCommandBufferBeginInfo cbbi = { .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
					  .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT };
	VkMemoryBarrier to_host = { .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
				    .srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT,
				    .dstAccessMask = VK_ACCESS_HOST_READ_BIT };
	VkFenceCreateInfo fci = { .sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO };
	VkSubmitInfo si = { .sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1 };
	PFN_vkGetMemoryFdPropertiesKHR get_fd_props;
	VkPhysicalDevice *pdevs, pdev = VK_NULL_HANDLE;
	VkQueueFamilyProperties qf[16];
	VkMemoryRequirements req;
	VkInstance inst;
	VkDevice vdev;
	VkQueue queue;
	VkBuffer vbuf;
	VkDeviceMemory mem;
	VkCommandPool pool;
	VkCommandBuffer cb;
	VkFence fence;
	struct ibv_device **devs;
	struct ibv_context *ctx;
	struct sp_dev *dev;
	struct sp_buf *buf;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	uint32_t n = 0, nq = 16, *cpu;
	int fd, nd;

	if (!len || len % 4)
		DIE("vulkan_import: SIZE must be a non-zero multiple of 4");
	if (sp_dev_open(NULL, &dev) || sp_buf_alloc(dev, len, SP_NODE_DEFAULT, 0, &buf))
		DIE("vulkan_import: %s", sp_errmsg());
	len = sp_buf_size(buf);
	if (sp_buf_export(buf, SP_EXPORT_RDWR | SP_EXPORT_CLOEXEC, &fd))
		DIE("vulkan_import: %s", sp_errmsg());

	VK(vkCreateInstance(&ici, NULL, &inst));
	VK(vkEnumeratePhysicalDevices(inst, &n, NULL));
	pdevs = calloc(n ? n : 1, sizeof(*pdevs));
	if (!pdevs)
		DIE("vulkan_import: out of memory");
	VK(vkEnumeratePhysicalDevices(inst, &n, pdevs));
	for (uint32_t i = 0; i < n && pdev == VK_NULL_HANDLE; i++)
		if (has_exts(pdevs[i]))
			pdev = pdevs[i];
	free(pdevs);
	if (pdev == VK_NULL_HANDLE)
		DIE("vulkan_import: no Vulkan device with VK_EXT_external_memory_dma_buf");
	vkGetPhysicalDeviceQueueFamilyProperties(pdev, &nq, qf);
	for (qci.queueFamilyIndex = 0; qci.queueFamilyIndex < nq; qci.queueFamilyIndex++)
		if (qf[qci.queueFamilyIndex].queueFlags & (VK_QUEUE_GRAPHICS_BIT |
							   VK_QUEUE_COMPUTE_BIT |
							   VK_QUEUE_TRANSFER_BIT))
			break;
	if (qci.queueFamilyIndex == nq)
		DIE("vulkan_import: no queue that can fill a buffer");
	VK(vkCreateDevice(pdev, &dci, NULL, &vdev));
	vkGetDeviceQueue(vdev, qci.queueFamilyIndex, 0, &queue);
	get_fd_props = (PFN_vkGetMemoryFdPropertiesKHR)
		vkGetDeviceProcAddr(vdev, "vkGetMemoryFdPropertiesKHR");
	if (!get_fd_props)
		DIE("vulkan_import: no vkGetMemoryFdPropertiesKHR");

	/* Which memory types can this dma-buf be? */
	VK(get_fd_props(vdev, VK_EXTERNAL_MEMORY_HANDLE_TYPE_DMA_BUF_BIT_EXT, fd, &fdp));
	bci.size = len;
	VK(vkCreateBuffer(vdev, &bci, NULL, &vbuf));
	vkGetBufferMemoryRequirements(vdev, vbuf, &req);
	if (req.size > len)
		DIE("vulkan_import: the device wants %" PRIu64 " bytes for a %zu-byte buffer",
		    (uint64_t)req.size, len);
	ded.buffer = vbuf;
	imp.fd = fd;		/* Vulkan owns the fd once the import succeeds */
	mai.allocationSize = req.size;
	mai.memoryTypeIndex = pick_type(pdev, req.memoryTypeBits & fdp.memoryTypeBits);
	VK(vkAllocateMemory(vdev, &mai, NULL, &mem));
	VK(vkBindBufferMemory(vdev, vbuf, mem, 0));

	/* The GPU writes the buffer, then everything it wrote is in DRAM. */
	cpci.queueFamilyIndex = qci.queueFamilyIndex;
	VK(vkCreateCommandPool(vdev, &cpci, NULL, &pool));
	cbai.commandPool = pool;
	VK(vkAllocateCommandBuffers(vdev, &cbai, &cb));
	VK(vkBeginCommandBuffer(cb, &cbbi));
	vkCmdFillBuffer(cb, vbuf, 0, len, 0x5eed5eed);
	vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0,
			     1, &to_host, 0, NULL, 0, NULL);
	VK(vkEndCommandBuffer(cb));
	VK(vkCreateFence(vdev, &fci, NULL, &fence));
	si.pCommandBuffers = &cb;
	VK(vkQueueSubmit(queue, 1, &si, fence));
	VK(vkWaitForFences(vdev, 1, &fence, VK_TRUE, UINT64_MAX));

	devs = ibv_get_device_list(&nd);
	if (!devs || !nd)
		DIE("vulkan_import: no RDMA device (rdma link add rxe0 type rxe netdev IF for Soft-RoCE)");
	ctx = ibv_open_device(devs[0]);
	pd = ctx ? ibv_alloc_pd(ctx) : NULL;
	if (!pd)
		DIE("vulkan_import: cannot open %s", ibv_get_device_name(devs[0]));
	cpu = sp_buf_addr(buf);
	mr = ibv_reg_mr(pd, cpu, len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			IBV_ACCESS_REMOTE_READ);
	if (!mr)
		DIE("vulkan_import: ibv_reg_mr on %s: %m", ibv_get_device_name(devs[0]));
	for (size_t i = 0; i < len / 4; i++)
		if (cpu[i] != 0x5eed5eed)
			DIE("vulkan_import: byte %zu: the CPU does not see what the GPU wrote", i * 4);
	printf("vulkan_import: %zu bytes written by the GPU, registered on %s: addr %p rkey %#" PRIx32 "\n",
	       len, ibv_get_device_name(devs[0]), (void *)cpu, mr->rkey);

	ibv_dereg_mr(mr);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(devs);
	vkDestroyFence(vdev, fence, NULL);
	vkDestroyCommandPool(vdev, pool, NULL);
	vkDestroyBuffer(vdev, vbuf, NULL);
	vkFreeMemory(vdev, mem, NULL);
	vkDestroyDevice(vdev, NULL);
	vkDestroyInstance(inst, NULL);
	sp_buf_free(buf);
	sp_dev_close(dev);
	return 0;
}
