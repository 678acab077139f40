/* srv_admin: fusionbench-server's user and token commands (srv_admin.c). */
#ifndef SRV_ADMIN_H
#define SRV_ADMIN_H

#include <stdbool.h>

/* True when arg names an admin command ("user", "token"). */
bool srv_admin_is_command(const char *arg);

/* Runs argv ("user add ...", "token create ...") against database_url (NULL:
 * libpq's defaults); returns the exit status (0, 1 failed, 2 usage). */
int srv_admin_main(const char *database_url, int argc, char **argv);

#endif
