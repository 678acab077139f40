/* The user's graph (workload "graph") the GPU tests run: conv + bias + ReLU,
 * flattened, as the job's params JSON. */
#ifndef FB_TEST_USER_GRAPH_H
#define FB_TEST_USER_GRAPH_H

#define USER_GRAPH                                                                                 \
    "{\"graph\":{\"tensors\":[{\"name\":\"input\",\"kind\":\"input\",\"shape\":[2,3,8,8]},"        \
    "{\"name\":\"w\",\"kind\":\"weight\",\"shape\":[4,3,3,3]},"                                    \
    "{\"name\":\"b\",\"kind\":\"weight\",\"shape\":[4],\"init\":\"small\"}],"                      \
    "\"nodes\":[{\"op\":\"conv2d\",\"name\":\"c\",\"inputs\":[0,1,2],\"pad\":[1,1]},"              \
    "{\"op\":\"relu\",\"inputs\":[3]},{\"op\":\"flatten\",\"inputs\":[4],\"axis\":1}]}}"

#endif
