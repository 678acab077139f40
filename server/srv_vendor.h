/* srv_vendor: third-party browser libraries from the system's packages, at
 * /static/vendor/NAME: Chart.js from Debian's libjs-chart.js
 * (/usr/share/javascript/chart.js), found at build time (FB_CHARTJS_PATH) or
 * named at run time by $FB_CHARTJS; no page needs the internet. */
#ifndef SRV_VENDOR_H
#define SRV_VENDOR_H

#include "srv_req.h"

void srv_vendor_file(srv_req *r);

#endif
