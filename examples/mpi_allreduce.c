// SPDX-License-Identifier: MIT
/*
 * mpi_allreduce - Open MPI ping-pong and MPI_Allreduce in strixpeer buffers
 *
 *   mpirun -np N --mca pml ucx ./mpi_allreduce [MAXSIZE [ALLREDUCE [ITERS [AR_ITERS]]]]
 *
 * Every rank's send and receive buffers are strixpeer buffers on the NUMA
 * node of its NIC (the first device in UCX_NET_DEVICES; the caller's node
 * when sysfs has none). Ranks 0 and 1 ping-pong 8 B to MAXSIZE (default
 * 16 MiB, x8; up to ITERS round trips, default 100), then all ranks
 * MPI_Allreduce(SUM) ALLREDUCE bytes of doubles (default 64 MiB; best of
 * AR_ITERS, default 3). One round trip per size and every allreduce are
 * verified. Each step runs with strixpeer buffers, then with malloc()
 * buffers, in the same run; rank 0 prints both and their ratio (> 1:
 * strixpeer faster). Exit status 0 when everything was verified.
 *
 * On a cluster (README "Run it on a cluster"; Debian's Open MPI needs
 * "--mca pml ucx", its default configuration disables the UCX pml):
 *   mpicc -O2 mpi_allreduce.c $(pkg-config --cflags --libs strixpeer) -o mpi_allreduce
 *   mpirun -np 2 -H nodeA,nodeB --mca pml ucx -x UCX_TLS=rc,self \
 *       -x UCX_NET_DEVICES=mlx5_0:1 ./mpi_allreduce
 * "strixpeerctl buf show" on a node shows the buffers pinned meanwhile.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <strixpeer.h>

#define W MPI_COMM_WORLD
static int rank, nranks, bad;

/* The NUMA node of the first device in UCX_NET_DEVICES ("mlx5_0:1,..."). */
static int nic_node(const char **dev)
{
	char path[256];
	int n = -1;
	FILE *f;

	*dev = getenv("UCX_NET_DEVICES");
	snprintf(path, sizeof(path), "/sys/class/infiniband/%.*s/device/numa_node",
		 *dev ? (int)strcspn(*dev, ":,") : 0, *dev ? *dev : "");
	if ((f = fopen(path, "r")) && fscanf(f, "%d", &n) != 1)
		n = -1;
	if (f)
		fclose(f);
	return n >= 0 ? n : SP_NODE_DEFAULT;
}

static unsigned char pat(size_t i, size_t seed)
{
	return (unsigned char)((i * 131 + seed * 7 + (i >> 12)) & 0xff);
}

/* One verified round trip, then @iters timed ones; returns MB/s. */
static double pingpong(unsigned char *s, unsigned char *r, int len, int iters)
{
	int peer = rank ^ 1;
	double t = 0;

	if (rank > 1)
		return 0;
	for (int it = -1; it < iters; it++) {
		if (it == 0)
			t = MPI_Wtime();
		for (int i = 0; it < 0 && i < len; i++)
			s[i] = pat((size_t)i, (size_t)len + (size_t)rank);
		if (rank == 0)
			MPI_Send(s, len, MPI_BYTE, peer, 0, W);
		MPI_Recv(r, len, MPI_BYTE, peer, 0, W, MPI_STATUS_IGNORE);
		if (rank == 1)
			MPI_Send(s, len, MPI_BYTE, peer, 0, W);
		for (int i = 0; it < 0 && i < len; i++)
			bad += r[i] != pat((size_t)i, (size_t)len + (size_t)peer);
	}
	return 2.0 * len * iters / (MPI_Wtime() - t) / 1e6;
}

/* @reps verified MPI_Allreduce(SUM)s of @n doubles; returns the best time. */
static double allreduce(double *s, double *r, int n, int reps)
{
	double best = 1e30;

	for (int i = 0; i < n; i++)
		s[i] = rank + (double)i;
	for (int k = 0; k < reps; k++) {
		double t;

		memset(r, 0, (size_t)n * sizeof(*r));
		MPI_Barrier(W);
		t = MPI_Wtime();
		MPI_Allreduce(s, r, n, MPI_DOUBLE, MPI_SUM, W);
		t = MPI_Wtime() - t;
		best = t < best ? t : best;
		for (int i = 0; i < n; i++)
			bad += r[i] != (double)nranks * i + nranks * (nranks - 1) / 2.0;
	}
	return best;
}

int main(int argc, char **argv)
{
	size_t max = argc > 1 ? strtoull(argv[1], NULL, 0) : 16 << 20;
	size_t ar = argc > 2 ? strtoull(argv[2], NULL, 0) : 64 << 20;
	int iters = argc > 3 ? atoi(argv[3]) : 100, reps = argc > 4 ? atoi(argv[4]) : 3;
	size_t len = ((max > ar ? max : ar) + (2 << 20) - 1) & ~(size_t)((2 << 20) - 1);
	unsigned char *b[2][2];	/* [strixpeer, malloc][send, receive] */
	struct sp_buf *sb[2];
	struct sp_dev *dev;
	const char *nic;
	double bw[2], t[2];
	int node, all_bad;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(W, &rank);
	MPI_Comm_size(W, &nranks);
	node = nic_node(&nic);
	for (int i = 0; i < 2; i++) {
		if ((i == 0 && sp_dev_open(NULL, &dev)) ||
		    sp_buf_alloc(dev, len, node, 0, &sb[i])) {
			fprintf(stderr, "rank %d: strixpeer: %s\n", rank, sp_errmsg());
			MPI_Abort(W, 1);
		}
		b[0][i] = sp_buf_addr(sb[i]);
		if (!(b[1][i] = aligned_alloc(2 << 20, len)))
			MPI_Abort(W, 1);
		memset(b[1][i], 0, len);	/* fault in, as strixpeer's are */
	}
	printf("rank %d pid %d: NIC %s, buffers on NUMA node %d%s\n", rank, (int)getpid(),
	       nic ? nic : "(UCX_NET_DEVICES unset)", node,
	       node == SP_NODE_DEFAULT ? " (the NIC has none: the caller's)" : "");
	fflush(stdout);
	MPI_Barrier(W);
	if (rank == 0)
		printf("%10s %6s %15s %12s %17s\n", "bytes", "iters", "strixpeer MB/s",
		       "malloc MB/s", "strixpeer/malloc");
	for (size_t sz = 8; nranks > 1 && sz <= max; sz *= 8) {
		int n = (int)(2 * max / sz);

		n = n > iters ? iters : n < 1 ? 1 : n;
		for (int v = 0; v < 2; v++)
			bw[v] = pingpong(b[v][0], b[v][1], (int)sz, n);
		if (rank == 0)
			printf("%10zu %6d %15.2f %12.2f %17.3f\n", sz, n, bw[0], bw[1], bw[0] / bw[1]);
		fflush(stdout);
	}
	for (int v = 0; v < 2; v++)
		t[v] = allreduce((double *)b[v][0], (double *)b[v][1], (int)(ar / 8), reps);
	MPI_Allreduce(&bad, &all_bad, 1, MPI_INT, MPI_SUM, W);
	if (rank == 0) {
		printf("allreduce %zu bytes, best of %d: strixpeer %.3f s, malloc %.3f s, malloc/strixpeer time %.3f\n",
		       ar, reps, t[0], t[1], t[1] / t[0]);
		if (all_bad)
			printf("mpi_allreduce: %d wrong bytes or elements\n", all_bad);
		else
			printf("mpi_allreduce: every byte and element verified\n");
	}
	for (int i = 0; i < 2; i++) {
		sp_buf_free(sb[i]);
		free(b[1][i]);
	}
	sp_dev_close(dev);
	MPI_Finalize();
	return all_bad != 0;
}
