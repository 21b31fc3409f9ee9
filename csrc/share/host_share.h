/* The host implementation's housekeeping (share/host_share.c). */
#ifndef JMG_SHARE_HOST_SHARE_H
#define JMG_SHARE_HOST_SHARE_H

/* Removes the shared regions whose creating process is gone (killed before
 * it could unlink its region); returns how many. Pids must be of this pid
 * namespace (the rendezvous assumes the same). */
int jmg_host_share_sweep(void);

#endif
