DROP TABLE coord_slots;
DROP TABLE coord_queue;
DROP TABLE coord_leases;
